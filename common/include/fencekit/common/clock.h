// Clock: how fencekit code reads the time of leases, waits and deadlines, and sleeps or waits for
// them, so that tests can replace it. Taken by LockClient (LockOptions::clock: leases' validity,
// Acquire's wait, backoff; HeldLock renews and watches validity on its client's clock),
// FencedStore (StoreOptions::clock: the history's times) and the pause kit's checker.
// What is not on it, on purpose: timeouts of sockets, processes and SQLite's busy handler, and
// Asio's timers, which the operating system measures in real time; each such place says so.
#pragma once

#include <algorithm>
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
  // Waits on `cv` (with `mu` held, released while blocked) until it is notified or `until` has
  // passed on this clock: false once it has. May return true spuriously, so callers loop on
  // their condition.
  virtual bool WaitUntil(CondVar& cv, Mutex& mu, std::chrono::steady_clock::time_point until)
      FENCEKIT_REQUIRES(mu) = 0;
  // How long to block in real time, when waiting `d` on this clock for something only the
  // operating system can wait for (a futex, a socket), before looking at the clock again: `d`
  // on the real clock; at most a millisecond on a fake one, whose time moves without it.
  virtual std::chrono::steady_clock::duration RealWait(
      std::chrono::steady_clock::duration d) const {
    return d;
  }

  // The process-wide real clock. Never null; never destroyed.
  static Clock* Real();
};

// A clock that moves only when told to; sleeping advances it. For tests and pause simulation.
// WaitUntil returns once Advance (or SleepUntil) has moved it to `until`, looking every
// millisecond of real time, or when `cv` is notified. Thread safety: safe for concurrent use.
class FakeClock final : public Clock {
 public:
  FakeClock();
  std::chrono::steady_clock::time_point Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  void SleepUntil(std::chrono::steady_clock::time_point until) override;
  bool WaitUntil(CondVar& cv, Mutex& mu, std::chrono::steady_clock::time_point until) override
      FENCEKIT_REQUIRES(mu);
  std::chrono::steady_clock::duration RealWait(
      std::chrono::steady_clock::duration d) const override {
    return std::min<std::chrono::steady_clock::duration>(d, std::chrono::milliseconds(1));
  }
  void Advance(std::chrono::steady_clock::duration d);

 private:
  mutable Mutex mu_;
  std::chrono::steady_clock::time_point now_ FENCEKIT_GUARDED_BY(mu_);
  std::chrono::system_clock::time_point wall_now_ FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit
