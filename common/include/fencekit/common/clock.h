// Clock: the single way fencekit code reads time or sleeps, so tests can replace it.
#pragma once

#include <chrono>

#include "fencekit/common/mutex.h"

namespace fencekit {

// Thread safety: implementations are safe for concurrent use.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for leases, deadlines and timeouts.
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Wall-clock time, only for records shown to people (history, logs).
  virtual std::chrono::system_clock::time_point WallNow() const = 0;
  virtual void SleepUntil(std::chrono::steady_clock::time_point until) = 0;
  void SleepFor(std::chrono::steady_clock::duration d) { SleepUntil(Now() + d); }

  // The process-wide real clock. Never null; never destroyed.
  static Clock* Real();
};

// A clock that moves only when told to; sleeping advances it. For tests and pause simulation.
// Thread safety: safe for concurrent use.
class FakeClock final : public Clock {
 public:
  FakeClock();
  std::chrono::steady_clock::time_point Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  void SleepUntil(std::chrono::steady_clock::time_point until) override;
  void Advance(std::chrono::steady_clock::duration d);

 private:
  mutable Mutex mu_;
  std::chrono::steady_clock::time_point now_ FENCEKIT_GUARDED_BY(mu_);
  std::chrono::system_clock::time_point wall_now_ FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit
