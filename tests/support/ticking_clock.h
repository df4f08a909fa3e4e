// A fake clock whose every reading moves it on by a step: whatever the code under test does
// between two readings takes one step, so a request's duration is known without sleeping.
#pragma once

#include <chrono>

#include "fencekit/common/clock.h"

namespace fencekit::testing {

// Thread safety: safe for concurrent use.
class TickingClock final : public Clock {
 public:
  explicit TickingClock(std::chrono::milliseconds step) : step_(step) {}

  // The time, then one step later for the next reading.
  std::chrono::steady_clock::time_point Now() const override {
    auto now = fake_.Now();
    fake_.Advance(step_);
    return now;
  }
  std::chrono::system_clock::time_point WallNow() const override { return fake_.WallNow(); }
  void SleepUntil(std::chrono::steady_clock::time_point until) override {
    fake_.SleepUntil(until);
  }
  bool WaitUntil(CondVar& cv, Mutex& mu, std::chrono::steady_clock::time_point until) override
      FENCEKIT_REQUIRES(mu) {
    return fake_.WaitUntil(cv, mu, until);
  }
  std::chrono::steady_clock::duration RealWait(
      std::chrono::steady_clock::duration d) const override {
    return fake_.RealWait(d);
  }

 private:
  const std::chrono::milliseconds step_;
  mutable FakeClock fake_;
};

}  // namespace fencekit::testing
