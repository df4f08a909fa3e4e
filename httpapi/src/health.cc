#include "health.h"

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <memory>

#include "fencekit/fencedstore/store.h"
#include "write_watch.h"

namespace fencekit {
namespace net = boost::asio;

namespace {

// A lock name no client needs: the probe reads its fence, which is usually absent.
constexpr std::string_view kProbeLock = "fencekit/health-probe";

// One check: answered by the probe or by the timer, whichever comes first.
struct Check {
  explicit Check(net::any_io_executor ex, HealthChecker::Done d)
      : timer(net::make_strand(ex)), done(std::move(d)) {}
  bool Claim() { return !answered.exchange(true); }
  net::steady_timer timer;  // used on its strand only
  HealthChecker::Done done;
  std::atomic<bool> answered{false};
};

}  // namespace

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

void HealthChecker::Examine(bool ready, Done done) {
  auto check = std::make_shared<Check>(executor_, std::move(done));
  bool queued = probes_.TryPost([this, check, ready] {
    if (check->answered.load()) return;  // timed out while queued
    Status probed = Probe(ready);
    if (!check->Claim()) return;
    net::post(check->timer.get_executor(), [check] { check->timer.cancel(); });
    check->done(std::move(probed));
  });
  if (!queued) {
    check->Claim();
    return check->done(Status::Unavailable(
        "earlier health checks are still waiting for the database; it is not answering reads "
        "quickly"));
  }
  net::post(check->timer.get_executor(), [check, ready, timeout = timeout_] {
    if (check->answered.load()) return;  // the probe was quicker: nothing to cancel later
    check->timer.expires_after(timeout);
    check->timer.async_wait([check, ready, timeout](boost::system::error_code ec) {
      if (ec || !check->Claim()) return;
      check->done(Status::Unavailable(
          std::string(ready ? "the database did not answer a read, or a probe commit after a "
                              "failed commit, within "
                            : "the database did not answer a read within ") +
          std::to_string(timeout.count()) + " ms"));
    });
  });
}

}  // namespace fencekit
