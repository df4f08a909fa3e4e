#include "observe/health.h"

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <memory>

#include "fencekit/common/mutex.h"
#include "fencekit/fencedstore/store.h"
#include "net/write_watch.h"

namespace fencekit::httpapi {
namespace net = boost::asio;

namespace {

// A lock name no client needs: the probe reads its fence, which is usually absent.
constexpr std::string_view kProbeLock = "fencekit/health-probe";

}  // namespace

// One probe and the checks that wait for it: answered by the probe or by the timer, whichever
// comes first.
struct HealthChecker::Round {
  explicit Round(net::any_io_executor ex) : timer(net::make_strand(ex)) {}
  net::steady_timer timer;    // used on its strand only
  // Guarded by the checker's mu_: not annotated, as the analysis cannot name another object's
  // mutex from here.
  std::vector<Done> waiting;
  bool answered = false;
};

HealthChecker::HealthChecker(FencedStore* store, WriteWatch* writes,
                             net::any_io_executor timer_executor, std::chrono::milliseconds timeout)
    : store_(store), writes_(writes), executor_(std::move(timer_executor)), timeout_(timeout) {}

void HealthChecker::CheckLive(Done done) { Examine(false, std::move(done)); }

void HealthChecker::CheckReady(Done done) {
  if (draining_.load()) {
    return done(
        Status::Unavailable("fenced is shutting down: it finishes the requests in flight "
                            "and takes no new connections"));
  }
  Examine(true, std::move(done));
}

Status HealthChecker::Probe(bool ready) {
  auto fence = store_->Fence(kProbeLock);
  if (!fence.ok()) {
    return Status::Unavailable("the database did not answer a read: " + fence.status().message());
  }
  if (!ready || writes_ == nullptr) return Status::Ok();
  const std::uint64_t seen = writes_->failures();
  Status state = writes_->WriteState();
  if (state.ok()) return state;
  // Try the write path now, as the next write would, rather than wait for a write.
  if (Status writable = store_->CheckWritable(); !writable.ok()) {
    return Status::Unavailable(state.message() +
                               "; a probe commit just now failed too: " + writable.message());
  }
  writes_->ClearFailure(seen);
  return Status::Ok();
}

void HealthChecker::Finish(const std::shared_ptr<Round>& round, const Status& s) {
  std::vector<Done> waiting;
  {
    MutexLock lock(mu_);
    if (round->answered) return;
    round->answered = true;
    waiting.swap(round->waiting);
    for (auto& current : current_) {
      if (current == round) current.reset();  // the next check starts a fresh probe
    }
  }
  for (auto& done : waiting) done(s);
}

void HealthChecker::Examine(bool ready, Done done) {
  std::shared_ptr<Round> round;
  {
    MutexLock lock(mu_);
    auto& current = current_[ready ? 1 : 0];
    if (current != nullptr) {
      current->waiting.push_back(std::move(done));  // one per connection at most: bounded
      return;
    }
    round = current = std::make_shared<Round>(executor_);
    round->waiting.push_back(std::move(done));
  }
  bool queued = probes_.TryPost([this, round, ready] {
    {
      MutexLock lock(mu_);
      if (round->answered) return;  // timed out while queued
    }
    Status probed = Probe(ready);
    Finish(round, probed);
    net::post(round->timer.get_executor(), [round] { round->timer.cancel(); });
  });
  if (!queued) {
    return Finish(round, Status::Unavailable(
                             "earlier health checks are still waiting for the database; it is "
                             "not answering reads quickly"));
  }
  net::post(round->timer.get_executor(), [this, round, ready, timeout = timeout_] {
    {
      MutexLock lock(mu_);
      if (round->answered) return;  // the probe was quicker: nothing to cancel later
    }
    round->timer.expires_after(timeout);
    round->timer.async_wait([this, round, ready, timeout](boost::system::error_code ec) {
      if (ec) return;
      Finish(round, Status::Unavailable(
                        std::string(ready ? "the database did not answer a read, or a probe "
                                            "commit after a failed commit, within "
                                          : "the database did not answer a read within ") +
                        std::to_string(timeout.count()) + " ms"));
    });
  });
}

}  // namespace fencekit::httpapi
