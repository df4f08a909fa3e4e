#include "fencekit/common/clock.h"

#include <thread>

#include "fencekit/common/mutex.h"

namespace fencekit {
namespace {

class RealClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now();
  }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void SleepUntil(std::chrono::steady_clock::time_point until) override {
    std::this_thread::sleep_until(until);
  }
  bool WaitUntil(CondVar& cv, Mutex& mu, std::chrono::steady_clock::time_point until) override
      FENCEKIT_REQUIRES(mu) {
    return cv.WaitUntil(mu, until);
  }
};

}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

FakeClock::FakeClock()
    : now_(std::chrono::steady_clock::time_point() + std::chrono::hours(1)),
      wall_now_(std::chrono::system_clock::time_point() + std::chrono::hours(24 * 365 * 50)) {}

std::chrono::steady_clock::time_point FakeClock::Now() const {
  MutexLock lock(mu_);
  return now_;
}

std::chrono::system_clock::time_point FakeClock::WallNow() const {
  MutexLock lock(mu_);
  return wall_now_;
}

void FakeClock::SleepUntil(std::chrono::steady_clock::time_point until) {
  MutexLock lock(mu_);
  if (until > now_) {
    wall_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(until - now_);
    now_ = until;
  }
}

bool FakeClock::WaitUntil(CondVar& cv, Mutex& mu, std::chrono::steady_clock::time_point until) {
  if (Now() >= until) return false;
  // Advance, on another thread, notifies no one.
  cv.WaitFor(mu, RealWait(until - Now()));
  return Now() < until;
}

void FakeClock::Advance(std::chrono::steady_clock::duration d) {
  MutexLock lock(mu_);
  now_ += d;
  wall_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

}  // namespace fencekit
