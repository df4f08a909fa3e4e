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

HealthChecker::HealthChecker(FencedStore* store, const WriteWatch* writes,
                             net::any_io_executor timer_executor, std::chrono::milliseconds timeout)
    : store_(store), writes_(writes), executor_(std::move(timer_executor)), timeout_(timeout) {}

void HealthChecker::CheckLive(Done done) {
  auto check = std::make_shared<Check>(executor_, std::move(done));
  bool queued = probes_.TryPost([this, check] {
    if (check->answered.load()) return;  // timed out while queued
    auto fence = store_->Fence(kProbeLock);
    if (!check->Claim()) return;
    net::post(check->timer.get_executor(), [check] { check->timer.cancel(); });
    check->done(fence.ok() ? Status::Ok()
                           : Status::Unavailable("the database did not answer a read: " +
                                                 fence.status().message()));
  });
  if (!queued) {
    check->Claim();
    return check->done(Status::Unavailable(
        "earlier health checks are still waiting for the database; it is not answering reads "
        "quickly"));
  }
  net::post(check->timer.get_executor(), [check, timeout = timeout_] {
    if (check->answered.load()) return;  // the probe was quicker: nothing to cancel later
    check->timer.expires_after(timeout);
    check->timer.async_wait([check, timeout](boost::system::error_code ec) {
      if (ec || !check->Claim()) return;
      check->done(Status::Unavailable("the database did not answer a read within " +
                                      std::to_string(timeout.count()) + " ms"));
    });
  });
}

void HealthChecker::CheckReady(Done done) {
  if (draining_.load()) {
    return done(
        Status::Unavailable("fenced is shutting down: it finishes the requests in flight "
                            "and takes no new connections"));
  }
  CheckLive([this, done = std::move(done)](Status live) {
    if (!live.ok() || writes_ == nullptr) return done(std::move(live));
    done(writes_->WriteState());
  });
}

}  // namespace fencekit
