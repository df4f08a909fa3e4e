// LockBackend: what a lock service must provide; LockClient adds owners, validity, retries and
// waiting on top. Private to lockclient.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit::lockclient {

// A grant: its token and the id of the service that granted it (Lease::service).
struct Granted {
  FencingToken token;
  std::string service;
};

// Thread safety: implementations are safe for concurrent use.
class LockBackend {
 public:
  virtual ~LockBackend() = default;

  // Grants `lock` to `owner` for `ttl` when it is free, with a token above every earlier one.
  // When `owner` already holds it (a retry after a lost reply), returns the same token.
  // kBusy when another owner holds it; then *holder_remaining is its time left.
  virtual Result<Granted> TryAcquire(std::string_view lock, std::string_view owner,
                                     std::chrono::milliseconds ttl,
                                     std::chrono::milliseconds* holder_remaining) = 0;
  // kNotHeld, saying whether the lease expired or another owner holds the lock.
  virtual Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                        std::chrono::milliseconds ttl) = 0;
  virtual Status Release(std::string_view lock, std::string_view owner, FencingToken token) = 0;
  virtual Result<LockInfo> Inspect(std::string_view lock) = 0;
  // See LockClient::CheckToken.
  virtual Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) = 0;
  // See LockClient::service_id.
  virtual std::string service_id() const = 0;
  // Returns when `lock` may have been released, or after at most `max_wait`.
  virtual void WaitForRelease(std::string_view lock, std::chrono::milliseconds max_wait) = 0;
  virtual const std::string& service() const = 0;
  // Services that keep a first-come-first-served line of waiters (etcd) say so here, and
  // LockClient::Acquire then waits in that line with AcquireInLine instead of retrying.
  virtual bool QueuesWaiters() const { return false; }
  // Joins the line for `lock` and waits until `owner` is first (the token), or `deadline`
  // (kTimeout, having left the line). *valid_from: when the lease's ttl last started.
  virtual Result<Granted> AcquireInLine(std::string_view lock, std::string_view owner,
                                        std::chrono::milliseconds ttl,
                                        std::chrono::steady_clock::time_point deadline,
                                        std::chrono::steady_clock::time_point* valid_from) {
    return Status::Internal("this lock service keeps no line of waiters");
  }
  // See LockClient::counter_resets_detected.
  virtual std::uint64_t counter_resets_detected() const { return 0; }
  // See LockClient::node_metrics.
  virtual std::vector<NodeMetrics> node_metrics() const { return {}; }
};

Result<std::unique_ptr<LockBackend>> OpenSqliteBackend(std::string_view uri,
                                                       const LockOptions& options);
Result<std::unique_ptr<LockBackend>> OpenRedisBackend(std::string_view uri,
                                                      const LockOptions& options);
Result<std::unique_ptr<LockBackend>> OpenRedlockBackend(std::string_view uri,
                                                        const LockOptions& options);
Result<std::unique_ptr<LockBackend>> OpenEtcdBackend(std::string_view uri,
                                                     const LockOptions& options);
Result<std::unique_ptr<LockBackend>> OpenZookeeperBackend(std::string_view uri,
                                                          const LockOptions& options);

// What validity loses to clock drift for a lease of `ttl`: ttl * drift_factor + drift_min.
std::chrono::steady_clock::duration LeaseDrift(const LockOptions& options,
                                               std::chrono::milliseconds ttl);

// "lock \"name\" on SERVICE": how every message names its subject.
std::string Subject(std::string_view lock, std::string_view service);

// kNotHeld for a `what` ("release" or "extend") of a lease that was already released: the
// message says so, apart from "expired" and "held by another owner".
Status AlreadyReleased(std::string_view what, std::string_view lock, std::string_view service);

}  // namespace fencekit::lockclient
