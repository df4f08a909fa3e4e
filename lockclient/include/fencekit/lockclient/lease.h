// A lease and what a lock service says about a lock: the data LockClient hands out, apart from
// the client, for code that only passes leases on (a store client, a holder).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "fencekit/common/clock.h"
#include "fencekit/common/token.h"

namespace fencekit {

// A lock grant.
struct Lease {
  std::string lock;
  std::string owner;  // 128 random bits from the OS CSPRNG, hex; unique per grant
  FencingToken token;
  std::chrono::milliseconds ttl{0};
  // On the client's clock (LockOptions::clock): start + ttl - drift, `start` read before the
  // request that started the service's ttl (a grant, an extension, etcd's keep-alive). Past it,
  // the lock service may have granted the lock to someone else. Never in the past at a grant.
  std::chrono::steady_clock::time_point valid_until;
  // The identity of the lock service that granted the token (passes CheckServiceId): tokens
  // of two services are not comparable. Sent with each write as Fencing-Service.
  std::string service;

  // Whether validity has run out on `clock`: the clock of the client that granted it
  // (LockClient::clock()); another clock's time is not comparable with valid_until.
  bool Expired(const Clock& clock) const { return clock.Now() >= valid_until; }
};

// The service's answer to "is this token the current holder's?" (LockClient::CheckToken).
struct TokenCheck {
  bool current = false;                // `token` is the live holder's token, now
  std::optional<FencingToken> holder;  // the live holder's token, when the lock is held
  // The id of the service that answered (as Lease::service). Empty only when the service has
  // no id yet (Redis after losing its data, before the next grant): then nothing is current.
  std::string service;
};

struct LockInfo {
  std::string lock;
  bool held = false;
  std::string owner;                       // when held
  std::optional<FencingToken> token;       // when held
  std::chrono::milliseconds remaining{0};  // when held: time left on the service's clock
  std::optional<FencingToken> last_token;  // the last token granted, held or not
};

}  // namespace fencekit
