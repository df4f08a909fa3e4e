// HeldLock: a granted lease held for its owner, released when destroyed, renewed in the
// background if asked, and marked lost when it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "fencekit/common/status.h"
#include "fencekit/lockclient/lease.h"

namespace fencekit {

class LockClient;

// A held lock: releases it when destroyed, optionally renews it in the background, and tells
// when it is lost. Thread safety: safe for concurrent use.
class HeldLock {
 public:
  using LostCallback = std::function<void(const Lease&, const Status& why)>;

  struct Options {
    // Extend on a background thread a third of the ttl after the validity started (the grant
    // or the last renewal), until released or lost; after a failed extend, try again sooner
    // (a new connection may work) until validity runs out. The lease is
    // marked lost at the end of its validity if no extend succeeded by then, even while one is
    // still waiting for its answer; and a renewal never runs after Release() has returned.
    bool auto_renew = false;
    // Runs once, on a renewal thread or the caller's, when the lease is found lost: an extend
    // refused, validity ran out before an extend succeeded, or a store refused its token.
    LostCallback on_lost;
  };

  // Acquires `lock` (waiting up to `wait`, as LockClient::Acquire) and holds it.
  static Result<std::unique_ptr<HeldLock>> Acquire(LockClient& client, std::string_view lock,
                                                   std::chrono::milliseconds wait, Options options);
  // Holds an already granted lease.
  HeldLock(LockClient& client, Lease lease, Options options);
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock();  // stops renewal and releases (errors ignored: use Release() to see them)

  // The current lease (valid_until moves with each renewal).
  Lease lease() const;
  // True once the lease is known lost. A lost lease is never re-acquired silently.
  bool lost() const;
  // The reason, once lost().
  Status lost_reason() const;
  // Marks the lease lost (fires on_lost once); e.g. after a store answered 409 to its token.
  void MarkLost(const Status& why);
  // Extends once now.
  Status Extend();
  // Stops renewal and releases. kNotHeld when it was already lost.
  Status Release();
  // Number of successful renewals so far.
  std::uint64_t renewals() const;

 private:
  struct State;
  enum class Loss { kRefused, kValidity, kMarked };
  void RenewLoop();
  void WatchValidity();
  void Lose(const Status& why, Loss cause);
  std::shared_ptr<State> state_;
};

}  // namespace fencekit
