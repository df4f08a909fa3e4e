// AnswerOutbox: answers decided off the I/O threads (by the store's writer thread, a group
// commit's worth at a time) reach their connections in one hop per burst, not one per answer.
// A hop per answer allocated a handler on the writer thread that an I/O thread freed, and took
// the I/O scheduler's lock each time.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "fencekit/common/mutex.h"
#include "handlers/handler.h"

namespace fencekit::httpapi {

class SessionBase;

// Thread safety: Hand is safe from any thread; what it hands runs on an I/O thread.
// Bounded by the connections: each has at most one answer on its way.
class AnswerOutbox {
 public:
  // Writes `res` on `session` (on the session's strand).
  using Deliver = void (*)(std::shared_ptr<SessionBase> session, HttpResponse&& res);

  explicit AnswerOutbox(boost::asio::io_context& ioc) : ioc_(ioc) {}
  AnswerOutbox(const AnswerOutbox&) = delete;
  AnswerOutbox& operator=(const AnswerOutbox&) = delete;

  // Queues `res` for `session`; the first answer of a burst posts the hop that delivers every
  // answer queued by the time it runs, in the order they were handed.
  void Hand(std::shared_ptr<SessionBase> session, Deliver deliver, HttpResponse res);

 private:
  struct Answer {
    std::shared_ptr<SessionBase> session;
    Deliver deliver;
    HttpResponse res;
  };
  void DeliverQueued();

  boost::asio::io_context& ioc_;
  Mutex mu_;
  std::vector<Answer> queued_ FENCEKIT_GUARDED_BY(mu_);
  bool posted_ FENCEKIT_GUARDED_BY(mu_) = false;  // a hop is on its way
};

}  // namespace fencekit::httpapi
