// LockClient: leases with fencing tokens from a lock service named by a URI.
//
//   sqlite:///path/locks.db   embedded, one machine, several processes (the default)
//   redis://host:port[/db]    one Redis node
//   redlock://h1:p1,h2:p2,h3:p3[,...]   Redlock over N independent Redis nodes
//   etcd://h1:p1[,h2:p2,...]  an etcd cluster (consensus); token = the key's create_revision
//   etcds://h1:p1[,...]       the same over HTTPS; both take user:password@ and ?prefix=
//                             (docs/lock-client.md)
//
// A lease's token is greater than every token granted before it for the same lock (see
// docs/lock-client.md for what each backend guarantees, and when it cannot).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"

namespace fencekit {

namespace lockclient {  // private to lockclient
class LockBackend;
class ReleasedLeases;
}  // namespace lockclient

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

// Per-node request counts of a multi-node service (Redlock), since the client was opened.
struct NodeMetrics {
  std::string address;          // host:port
  std::uint64_t requests = 0;   // script calls sent
  std::uint64_t granted = 0;    // answered yes (granted, released, extended, raised)
  std::uint64_t refused = 0;    // answered no: held by another owner, or not held
  std::uint64_t failed = 0;     // connection refused or broken, or an error reply
  std::uint64_t timed_out = 0;  // no reply within redlock_node_timeout
};

// What one LockClient has done since Open (LockClient::metrics()). Counters only grow.
struct LockMetrics {
  std::uint64_t acquire_attempts = 0;  // grant attempts: each TryAcquire try, each Acquire
  std::uint64_t grants = 0;            // leases granted
  std::uint64_t busy = 0;              // attempts answered: held by another owner
  std::uint64_t timeouts = 0;          // Acquire calls that gave up at their deadline
  std::uint64_t renewals = 0;          // extends that succeeded (HeldLock's and by hand)
  std::uint64_t renewal_failures = 0;  // extends that failed: refused, or the service unreachable
  // HeldLock leases lost, by cause.
  std::uint64_t lost_refused = 0;   // an extend was refused (expired, deleted, another owner)
  std::uint64_t lost_validity = 0;  // validity ran out before an extend succeeded
  std::uint64_t lost_marked = 0;    // MarkLost: a store refused the token, or the caller said so
  std::uint64_t counter_resets = 0;  // counter_resets_detected()
  std::uint64_t token_checks = 0;         // CheckToken calls answered
  std::uint64_t token_check_failures = 0;  // CheckToken calls that could not ask the service
  // Time from the start of each Acquire to its grant or its giving up: wait_buckets[i] counts
  // the calls that took at most kWaitBounds[i] seconds; the last bucket, the rest.
  static constexpr double kWaitBounds[] = {0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10, 60};
  std::vector<std::uint64_t> wait_buckets;
  double wait_seconds_sum = 0;
  std::uint64_t wait_count = 0;
  std::vector<NodeMetrics> nodes;  // Redlock: per node (node_metrics())
};

// `m` in Prometheus' text format, each metric named `prefix` + "_" + what it counts
// (fencekit_lock_grants_total, fencekit_lock_acquire_wait_seconds, ...), for a user's own
// /metrics page. `prefix` must be a valid metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*).
std::string RenderPrometheus(const LockMetrics& m, std::string_view prefix = "fencekit_lock");

// The default lock service, the one `fencectl` uses when given no --locks: $FENCEKIT_LOCKS when
// set and not empty, else one SQLite file per user and machine,
// sqlite://$XDG_STATE_HOME/fencekit/locks.db ($XDG_STATE_HOME defaults to ~/.local/state;
// without $HOME, /tmp/fencekit-UID), whatever the working directory. Makes the folder when it is
// missing. LockClient::Open("") opens it.
std::string DefaultLockUri();

// `uri` with the password of its user:password@ part, if any, replaced by "***", for messages
// and logs ("etcd://app:***@h1:2379"). Works on malformed URIs too.
std::string LockUriWithoutPassword(std::string_view uri);

struct LockOptions {
  // --- Affects behaviour ---
  // Lease length asked of the service.
  std::chrono::milliseconds ttl{10'000};
  // Validity is shortened by drift = ttl * drift_factor + drift_min (clock drift allowance).
  double drift_factor = 0.01;
  std::chrono::milliseconds drift_min{2};
  // Time source. Null means Clock::Real(). Not owned.
  Clock* clock = nullptr;

  // --- Affects performance ---
  // Each request to the service has this long (connect, send, reply).
  std::chrono::milliseconds op_timeout{1'000};
  // Retries of a busy or unavailable service: jittered exponential backoff in this range.
  std::chrono::milliseconds retry_min{2};
  std::chrono::milliseconds retry_max{200};
  // Connections kept open to a network service.
  int pool_size = 4;

  // --- Redis and Redlock ---
  // Locks whose highest token this client remembers (least recently used forgotten first), to
  // keep tokens rising for them if Redis loses its counters; see counter_resets_detected().
  std::size_t remembered_locks = 100'000;

  // --- Redlock only ---
  // Each node has this long per request (far below the ttl, so a dead node is skipped fast).
  std::chrono::milliseconds redlock_node_timeout{50};
  // Ask the nodes one after another instead of all at once.
  bool redlock_sequential = false;
};

// Thread safety: safe for concurrent use by several threads.
class LockClient {
 public:
  // `uri` as above; "" is DefaultLockUri(). kInvalidArgument for a malformed or unknown URI;
  // kUnavailable when the service cannot be reached (Redis: the node refuses or ignores a
  // connection within op_timeout; Redlock: fewer than a majority of the nodes accept one within
  // redlock_node_timeout; etcd: no endpoint answers). Open connects, so it fails at once
  // rather than at the first acquire.
  static Result<std::unique_ptr<LockClient>> Open(std::string_view uri, LockOptions options = {});
  ~LockClient();

  // One attempt. kBusy (with the holder's remaining time in the message) when held.
  Result<Lease> TryAcquire(std::string_view lock);
  Result<Lease> TryAcquire(std::string_view lock, std::chrono::milliseconds ttl);
  // Waits until granted or `wait` has passed on this client's clock (kTimeout; 0: one attempt,
  // in line where the service keeps one). Waiters are woken by a release (Redis: a signal list;
  // SQLite: in-process notification, else polling with backoff; etcd: a first-come-first-served
  // line, each waiter watching the key before its own).
  Result<Lease> Acquire(std::string_view lock, std::chrono::milliseconds wait);
  Result<Lease> Acquire(std::string_view lock, std::chrono::milliseconds wait,
                        std::chrono::milliseconds ttl);
  // Resets the lease's ttl if `lease.owner` still holds it, and moves valid_until.
  // kNotHeld when it expired or another owner holds the lock ("already released" when the
  // lease was released, as for Release).
  Status Extend(Lease& lease, std::chrono::milliseconds ttl);
  Status Extend(Lease& lease) { return Extend(lease, lease.ttl); }
  // kNotHeld when it expired or another owner holds the lock (nothing is released then).
  // A second Release of a lease that was already released, by this client or any other, is
  // kNotHeld too, and its message says "already released"; nothing is released then either.
  // The client remembers its own last 1024 releases, and the service the last release of each
  // lock (Redis and Redlock until another lease of the lock is released, or Redis loses its
  // data; etcd until another is released; SQLite until the lock is granted again, after which
  // another client hears "held by another owner"). A release whose reply was lost is resent,
  // and finding its own first release done, returns OK.
  Status Release(const Lease& lease);
  Result<LockInfo> Inspect(std::string_view lock);

  // Asks the service now whether `token` is the token of the live holder of `lock`: one round
  // trip, and it changes nothing. kUnavailable (or kTimeout) when the service cannot be asked
  // within op_timeout (Redlock: when fewer than a majority of the nodes answer): it never
  // guesses. What "current" means per backend, all read atomically with the service's id:
  //   sqlite   the lock row holds `token` and has not expired on this machine's wall clock;
  //   redis    the lock key (which expires on the server's clock) holds `token`;
  //   redlock  a majority of the nodes hold `token` in the lock key, under one service id;
  //   etcd     the first key of the lock's line has create_revision == `token` (a
  //            linearizable read: the key goes when the holder's etcd lease expires).
  // What is still trusted: the answer is true when the service gave it, and a lease may expire
  // right after; Redis without persistence forgets holders and ids on a restart (then the id
  // changes, so fences bound to the old one refuse the new tokens as wrong_service); Redlock
  // assumes bounded clock drift and pauses on its nodes; SQLite trusts the clocks of the
  // processes sharing the file.
  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token);

  // The id of the lock service (as Lease::service): read, or made, at Open. Redis and Redlock
  // make a new one when they lose their data, and then this returns the one the latest grant
  // reported. Empty for Redlock while no majority of the nodes agrees on one.
  std::string service_id() const;
  // "redis://127.0.0.1:6379/0" etc., for messages.
  const std::string& service() const;
  // Grants where the service's counter was found below a token this client had already seen
  // (Redis lost its data); the grant's token was raised above it. Always 0 for SQLite.
  std::uint64_t counter_resets_detected() const;
  // One entry per node for Redlock; empty for single-node services.
  std::vector<NodeMetrics> node_metrics() const;
  // A snapshot of this client's counters (RenderPrometheus renders it). Safe to call from any
  // thread, at any time.
  LockMetrics metrics() const;
  const LockOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

 private:
  LockClient(std::unique_ptr<lockclient::LockBackend> backend, LockOptions options);
  // One attempt with a given owner; on kBusy sets *holder_remaining.
  Result<Lease> Grant(std::string_view lock, std::chrono::milliseconds ttl,
                      const std::string& owner, std::chrono::milliseconds* holder_remaining);
  // Acquire on a service that keeps a line of waiters (etcd).
  Result<Lease> AcquireInLine(std::string_view lock, std::chrono::steady_clock::time_point deadline,
                              std::chrono::milliseconds ttl, const std::string& owner,
                              std::chrono::steady_clock::time_point began);
  std::chrono::steady_clock::duration Drift(std::chrono::milliseconds ttl) const;
  // kUnavailable, the lease released, when `lease` (asked for at `start`) has no validity left.
  Status RefuseIfBornExpired(const Lease& lease, std::chrono::steady_clock::time_point start);
  std::chrono::milliseconds Backoff(int attempt);

  friend class HeldLock;  // counts the leases it loses
  struct Counters;
  void CountWait(std::chrono::steady_clock::time_point began);

  std::unique_ptr<lockclient::LockBackend> backend_;
  std::unique_ptr<lockclient::ReleasedLeases> released_;
  std::unique_ptr<Counters> counters_;
  LockOptions options_;
  Clock* clock_;
};

// A held lock: releases it when destroyed, optionally renews it in the background, and tells
// when it is lost. Thread safety: safe for concurrent use.
class HeldLock {
 public:
  using LostCallback = std::function<void(const Lease&, const Status& why)>;

  struct Options {
    // Extend at ttl/3 on a background thread until released or lost; after a failed extend,
    // try again sooner (a new connection may work) until validity runs out. The lease is
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
