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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/lockclient/lease.h"
#include "fencekit/lockclient/lock_metrics.h"
#include "fencekit/lockclient/lock_options.h"

namespace fencekit {

namespace lockclient {  // private to lockclient
class LockBackend;
class ReleasedLeases;
}  // namespace lockclient

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

}  // namespace fencekit
