// StoreCallbacks: the callbacks the server has given the store and the store has not yet
// finished with. Each answers a write into the server (its metrics, its write watch, a
// connection's outbox), so the server waits for them before it frees what they use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <utility>

#include "fencekit/common/mutex.h"

namespace fencekit::httpapi {

// Thread safety: safe for concurrent use.
class StoreCallbacks {
  // One callback's count, copied with it: the callback is pending while any copy lives.
  class Ticket {
   public:
    explicit Ticket(StoreCallbacks* callbacks) : callbacks_(callbacks) {
      if (callbacks_ != nullptr) callbacks_->pending_.fetch_add(1, std::memory_order_relaxed);
    }
    Ticket(const Ticket& other) : Ticket(other.callbacks_) {}
    Ticket(Ticket&& other) noexcept : callbacks_(std::exchange(other.callbacks_, nullptr)) {}
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (callbacks_ != nullptr) callbacks_->Finished();
    }

   private:
    StoreCallbacks* callbacks_;
  };

 public:
  // `f`, counted while it lives (any copy of it). It is destroyed before its ticket, so that
  // what it holds (a connection) goes while the server still waits. A null `callbacks` counts
  // nothing.
  template <class F>
  class Counted {
   public:
    Counted(StoreCallbacks* callbacks, F f) : ticket_(callbacks), f_(std::move(f)) {}
    template <class... Args>
    void operator()(Args&&... args) {
      f_(std::forward<Args>(args)...);
    }

   private:
    Ticket ticket_;  // declared first: destroyed last
    F f_;
  };

  StoreCallbacks() = default;
  StoreCallbacks(const StoreCallbacks&) = delete;
  StoreCallbacks& operator=(const StoreCallbacks&) = delete;

  std::size_t pending() const { return pending_.load(std::memory_order_acquire); }

  // Blocks until no callback is pending, or `until`; whether none is.
  bool AwaitNone(std::chrono::steady_clock::time_point until) {
    MutexLock lock(mu_);
    while (pending() != 0) {
      if (!none_.WaitUntil(mu_, until) && pending() != 0) return false;
    }
    return true;
  }

 private:
  void Finished() {
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    MutexLock lock(mu_);  // a waiter has either not read the count yet or waits on none_
    none_.NotifyAll();
  }

  std::atomic<std::size_t> pending_{0};
  Mutex mu_;
  CondVar none_;
};

}  // namespace fencekit::httpapi
