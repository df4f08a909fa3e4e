#include "net/work_queue.h"

#include <algorithm>

#include "fencekit/common/mutex.h"

namespace fencekit::httpapi {

WorkQueue::WorkQueue(unsigned threads, std::size_t max_queued) : max_queued_(max_queued) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { Work(); });
}

bool WorkQueue::TryPost(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.NotifyOne();
  return true;
}

void WorkQueue::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkQueue::Work() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace fencekit::httpapi
