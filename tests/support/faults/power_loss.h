// The power-loss sweep: a seeded workload of concurrent writers through the store's group commit
// and of lock grants from the SQLite lock service, both on the fault VFS's power-loss model,
// cut by a power loss at one of its I/O calls, then reopened from what survived and checked.
#pragma once

#include <cstdint>
#include <string>

#include "fencekit/fencedstore/store.h"
#include "support/faults/fault_vfs.h"

namespace fencekit::testing {

struct PowerLossOptions {
  int points = 100;  // power losses, each on a fresh store
  FaultVfs::Loss loss = FaultVfs::Loss::kDrop;
  Durability durability = Durability::kFull;
  std::uint64_t seed = 1;
  int writers = 4;
  int writes_per_writer = 48;
};

struct PowerLossReport {
  int points = 0;
  int acked_lost = 0;          // acknowledged writes missing, or older, after the loss
  int fence_regressions = 0;   // fences below a token they had acknowledged
  int token_regressions = 0;   // grants after the loss at or below a grant before it
  int integrity_failures = 0;  // PRAGMA integrity_check not "ok", or a store that won't open
  // "power-loss: points=N acked_lost=A fence_regressions=F token_regressions=T
  // integrity_failures=I"
  std::string Line() const;
};

// Runs the sweep in folders under $TMPDIR. Each point's crash call is drawn (seeded) from the
// I/O calls of a whole uncut run.
PowerLossReport RunPowerLossSweep(const PowerLossOptions& options);

}  // namespace fencekit::testing
