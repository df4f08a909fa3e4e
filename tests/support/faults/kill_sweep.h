// The kill sweep: a real fenced, written to from several connections at once, SIGKILLed at
// seeded moments (any phase of a group commit: queueing, deciding, the commit's fsync, the
// answers) and restarted each time on the same database; every acknowledged write must be there
// after each restart, and no fence may go down. Batch writers write a group of keys in one
// batch (POST /v1/batch) each time: after each restart a group is never torn (its keys hold one
// batch's values), and holds at least its last acknowledged batch.
#pragma once

#include <cstdint>
#include <string>

namespace fencekit::testing {

struct KillSweepOptions {
  int points = 20;
  std::uint64_t seed = 1;
  int writers = 4;  // connections, two per lock
  // Connections writing batches of 4 keys, each under a lock of its own.
  int batch_writers = 1;
  // Each point kills at a seeded moment within this long after its writers started.
  int max_kill_after_ms = 60;
  // The fenced binary; empty: the one this build made.
  std::string fenced;
};

struct KillSweepReport {
  int points = 0;
  int acked_lost = 0;  // acknowledged writes missing or changed after a restart
  int fence_regressions = 0;
  int torn_batches = 0;    // groups whose keys hold values of different batches, or some none
  int acked = 0;           // writes (a batch as one) acknowledged in all
  int acked_batches = 0;   // of them, batches
  int start_failures = 0;  // restarts that failed (each one also counts as a lost point)
  // "kill: points=N acked_lost=A fence_regressions=F torn_batches=T"
  std::string Line() const;
};

KillSweepReport RunKillSweep(const KillSweepOptions& options);

}  // namespace fencekit::testing
