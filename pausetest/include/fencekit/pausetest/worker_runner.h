// Seeded pause runs of the user's own worker program, in any language, against the user's own
// storage: `fencectl pause-test --worker CMD` (docs/testing-with-pauses.md, "Your own workers").
//
// One run: `setup` (if any) resets the user's storage; `clients` client processes each loop
//   acquire `lock` -> run `worker` through `sh -c` (FENCING_LOCK, FENCING_TOKEN, ... set) ->
//   release
// with the lease renewed meanwhile, while this process stops and continues whole clients (the
// renewer and the worker's process group) on a seeded schedule, so that leases run out while a
// worker still believes it holds one, and holds a client's traffic to the user's servers in
// its proxies (`proxies`, `holds_per_run`), so that a request sent under a lease arrives after
// it; then `check` (or the built-in linearizability check of
// the operations the workers recorded) judges the run. A failing run keeps its folder and a
// timeline (timeline.html).
//
// Three outcomes, kept apart: a run passes; fails (its check ran and judged it wrong: counted
// in failed_runs); or cannot be judged (the harness could not tell: a worker or check that
// cannot be started, a malformed or out-of-time history, nothing checked, a check that ran out
// of time or was killed). The last stops the command with an error saying what to fix, and the
// run's report says "NOT JUDGED", never "passed".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// A server the workers reach through the kit's proxies: each client gets a proxy of its own on a
// loopback port, in front of host:port, named to its workers by FENCEKIT_PROXY_<NAME>=
// 127.0.0.1:PORT. The proxy passes bytes (any TCP protocol) and holds them when told.
struct WorkerProxy {
  std::string name;  // [A-Za-z][A-Za-z0-9_]*; upper-cased in the variable's name
  std::string host;  // an IPv4 address or a name resolving to one
  std::uint16_t port = 0;
};

// "NAME=HOST:PORT" (fencectl's --proxy) as a WorkerProxy; kInvalidArgument saying what is wrong.
Result<WorkerProxy> ParseWorkerProxy(const std::string& text);

struct WorkerTestOptions {
  std::string worker;  // the command, run by `sh -c`; required
  std::string check;   // empty: the built-in check of the recorded operations
  std::string setup;   // empty: none
  // A run is judged only when its check had at least this many operations to judge: with the
  // built-in check, the workers' operations with outcome ok or fail; with `check`, the lines
  // of the merged history. Below it the run cannot be judged ("nothing was checked"). -1: 1
  // with the built-in check, 0 with `check` (which may judge the store, not the history).
  int min_operations = -1;
  std::string lock = "pause-test";
  // The lock service for the whole command (tokens only grow across runs, so the user's store
  // may keep its fences). Empty: an embedded SQLite file in the work directory; or, with
  // start_redis / start_etcd, a redis-server or an etcd cluster started for the command.
  std::string locks_uri;
  bool start_redis = false;
  int start_etcd = 0;
  // Lock-service faults, once per run at a seeded moment in its middle half, as the built-in
  // workload makes them: with start_redis, SIGKILL it and restart it empty (a lock service that
  // forgets its grants: its id, FENCING_SERVICE, changes); with start_etcd >= 3, SIGKILL the
  // leader and restart it later in the run.
  bool restart_locks = false;
  bool kill_etcd_leader = false;
  // With start_redis: the Redis is a primary with an asynchronous replica behind one address;
  // once per run, replication is cut at a seeded moment in the run's second quarter and, 1/8
  // to 1/4 of the run later, the primary is SIGKILLed and the replica promoted in its place,
  // without the grants made meanwhile (the service's id is replicated: FENCING_SERVICE stays).
  // Between runs the old primary rejoins, empty, as the new one's replica.
  bool failover_locks = false;
  int runs = 50;
  int clients = 3;
  std::uint64_t seed = 1;
  std::chrono::milliseconds ttl{150};
  std::chrono::milliseconds run_length{1'200};
  int pauses_per_run = 10;  // each 0.5-3x ttl, of a whole client
  std::vector<WorkerProxy> proxies;
  // Each 0.5-3x ttl: all of a client's traffic through its proxies stops, both ways, then
  // flows again. Needs `proxies`.
  int holds_per_run = 0;
  // One worker invocation may run this long; then SIGTERM, then SIGKILL after kill_grace.
  std::chrono::milliseconds worker_timeout{30'000};
  // After the run's end, a worker still running has this long to finish before SIGTERM, and as
  // long again before SIGKILL.
  std::chrono::milliseconds kill_grace{2'000};
  // Bounds `setup` and `check` (then SIGKILL: a setup that times out stops the command, a check
  // that times out fails its run) and the built-in check's search (undecided fails the run).
  std::chrono::milliseconds check_timeout{60'000};
  std::string work_dir;   // empty: a new directory under $TMPDIR (or /tmp)
  bool keep_all = false;  // keep every run's folder, not only failing runs'
  // Called after each run: its number, seed, whether it failed, and a one-line account.
  std::function<void(int run, std::uint64_t seed, bool failed, const std::string& line)> on_run;
};

struct WorkerTestSummary {
  int runs = 0;
  int failed_runs = 0;
  // Leases that ran out while their worker was still running.
  int expired_leases = 0;
  int holds = 0;  // of clients' traffic, played
  int lock_faults = 0;  // lock-service restarts and leader kills, played
  int runs_with_expired_leases = 0;
  int worker_invocations = 0;
  int worker_failures = 0;  // invocations that exited non-zero or were killed by a signal
  // What the checks judged over all runs (see WorkerTestOptions::min_operations).
  int operations = 0;
  std::string work_dir;  // empty when nothing was kept
  // "pause-runs: runs=R failed_runs=F expired_leases=E operations=O"
  std::string Line() const;
};

// Runs the runs. An error is the harness's (kInvalidArgument: options; kUnavailable: the lock
// service, a setup that failed, a run that cannot be judged, with what to fix and where its
// files are); a failing run is not an error, it is counted. Must be called from a process
// whose other threads (none but the proxies' own) hold no lock a forked client needs.
Result<WorkerTestSummary> RunWorkerPauseTests(const WorkerTestOptions& options);

// The clients of a run are fresh runs of the calling program, not forked copies of the kit: the
// kit has threads (its proxies), and a forked child of a threaded process may block forever on
// a lock one of them held at the fork (the allocator's, under AddressSanitizer). The kit execs
// /proc/self/exe with kWorkerClientCommand and a plan; a program that calls
// RunWorkerPauseTests must, first thing in main, hand such a command line to
// WorkerClientEntry and return what it returns.
inline constexpr const char* kWorkerClientCommand = "__pause-test-worker-client";
// `argv[1]` is kWorkerClientCommand: runs the client planned in argv[2]; its exit code.
int WorkerClientEntry(int argc, char** argv);

}  // namespace fencekit::pausetest
