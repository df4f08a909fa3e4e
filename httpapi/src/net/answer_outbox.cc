#include "net/answer_outbox.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace fencekit::httpapi {

void AnswerOutbox::Hand(std::shared_ptr<SessionBase> session, Deliver deliver, HttpResponse res) {
  {
    MutexLock lock(mu_);
    queued_.push_back(Answer{std::move(session), deliver, std::move(res)});
    if (std::exchange(posted_, true)) return;
  }
  boost::asio::post(ioc_, [this] { DeliverQueued(); });
}

void AnswerOutbox::DeliverQueued() {
  std::vector<Answer> answers;
  {
    MutexLock lock(mu_);
    answers.swap(queued_);
    posted_ = false;
  }
  for (auto& a : answers) a.deliver(std::move(a.session), std::move(a.res));
  answers.clear();
  // The drained buffer goes back for the next burst, unless one has begun in a buffer of its own.
  MutexLock lock(mu_);
  if (queued_.empty() && queued_.capacity() < answers.capacity()) queued_.swap(answers);
}

}  // namespace fencekit::httpapi
