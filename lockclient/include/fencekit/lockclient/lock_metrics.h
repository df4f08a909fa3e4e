// What a LockClient has done, as counters, and their Prometheus text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fencekit {

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

}  // namespace fencekit
