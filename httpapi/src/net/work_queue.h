// WorkQueue: a few threads and a bounded queue for work too slow for an I/O thread (long reads:
// the history, listings). Full means refused at once, never queued without bound.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "fencekit/common/mutex.h"

namespace fencekit::httpapi {

// Thread safety: TryPost may be called from any thread; Stop from one thread, once the callers
// of TryPost are gone.
class WorkQueue {
 public:
  // `threads` workers (at least 1); at most `max_queued` tasks wait beside the running ones.
  WorkQueue(unsigned threads, std::size_t max_queued);
  ~WorkQueue() { Stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `task`; false (and `task` dropped, not run) when the queue is full or stopped.
  bool TryPost(std::function<void()> task);
  // Runs what is queued, then joins the workers.
  void Stop();

 private:
  void Work();

  const std::size_t max_queued_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ FENCEKIT_GUARDED_BY(mu_);
  bool stopping_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace fencekit::httpapi
