// Seeded, randomized runs of real client processes that are paused past their leases, against
// a real `fenced`; every run's history is checked (see checker.h). `fencectl pause-test` is a
// thin wrapper; a user's own GoogleTest suite can call RunPauseTests directly.
//
// One run: start a fresh `fenced` (a new database); fork `clients` processes that loop
//   acquire -> claim (a fenced write that raises the lock's fence to this token)
//   -> read the counter -> write counter + 1 with the token -> release
// while this process stops and continues them on a seeded schedule (and optionally kills the
// store, the lock service or the etcd leader with SIGKILL and restarts it); then stop the clients,
// read the store's log and final counter, and check.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "fencekit/common/status.h"
#include "fencekit/pausetest/checker.h"

namespace fencekit::pausetest {

struct PauseTestOptions {
  // Lock service URI; empty means a fresh embedded SQLite file per run in `work_dir`, or, with
  // start_redis, a redis-server started for each run, or, with start_etcd, an etcd cluster.
  std::string locks_uri;
  bool start_redis = false;
  // SIGKILL the lock service once per run and restart it empty (needs start_redis): the
  // counter and the service id are lost, so the store, bound to the old id, refuses the new
  // tokens (docs/testing-with-pauses.md).
  bool restart_locks = false;
  // > 0: each run starts an etcd cluster of this many members (loopback, data in the run's
  // folder) as the lock service; the clients' URI lists every member, from a seeded one on.
  // etcd's leases are whole seconds: ttl must be >= 1s.
  int start_etcd = 0;
  // Once per run, at a seeded moment in the run's second quarter, SIGKILL the member the
  // cluster names as leader; restart it (same data and ports) 1/8 to 3/8 of the run later, so
  // that it rejoins before the run ends. Needs start_etcd >= 3, so that the others keep a
  // majority and elect a new leader meanwhile.
  bool kill_etcd_leader = false;
  int runs = 50;
  int clients = 3;
  std::uint64_t seed = 1;
  // False: the store runs with --no-fencing (the control arm: lost updates must show).
  bool fencing = true;
  std::chrono::milliseconds ttl{150};
  std::chrono::milliseconds run_length{1'200};
  int pauses_per_run = 10;  // each 0.5-3x ttl
  // Each write waits a random 0..max_delay before it is sent (a slow network).
  std::chrono::milliseconds max_delay{0};
  // SIGKILL the store once per run, at a random time, and restart it on the same database.
  bool kill_store = false;
  // The `fenced` binary. Empty: next to the running executable, then on PATH.
  std::string fenced_path;
  // Where histories and databases go. Empty: a new directory under $TMPDIR (or /tmp).
  std::string work_dir;
  // Keep every run's files; by default only failing runs' are kept.
  bool keep_all = false;
  // Called after each run, e.g. to print progress.
  std::function<void(int run, std::uint64_t seed, const CheckReport&)> on_run;
};

struct PauseTestSummary {
  int runs = 0;
  int stale_accepted = 0;
  int lost_updates = 0;
  int missing_acknowledged = 0;
  int expired_leases = 0;
  int runs_with_expired_leases = 0;
  int acknowledged_writes = 0;
  // With kill_etcd_leader: runs in which the leader was SIGKILLed, the others elected another,
  // and the killed member was restarted and rejoined.
  int etcd_leader_kills = 0;
  // Where the runs' files are; empty when none was kept (the temporary work directory of runs
  // that all passed is removed).
  std::string work_dir;
  // "pause-runs: runs=R stale_accepted=S lost_updates=L expired_leases=E"
  std::string Line() const;
};

// Runs the runs. Errors (kUnavailable, kInvalidArgument) are for the harness itself: fenced
// would not start, the lock service is unreachable; a safety violation is not an error, it is
// counted in the summary. Must be called from a single-threaded process: clients are forked.
Result<PauseTestSummary> RunPauseTests(const PauseTestOptions& options);

}  // namespace fencekit::pausetest
