// The pause-test checker: reads a history of client operations beside the store's own log of
// decisions and final state, and counts what fencing must prevent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fencekit/fencedstore/types.h"  // Decision
#include "fencekit/pausetest/history.h"

namespace fencekit::pausetest {

struct CheckInput {
  std::vector<HistoryOp> history;
  // The store's decisions (GET /v1/history, or FencedStore::History), in commit order or not:
  // the checker sorts them by seq.
  std::vector<Decision> store_log;
  // The final value of every counter key; a key that is absent counts as 0.
  std::map<std::string, std::int64_t> final_counters;
};

struct CheckReport {
  // (a) Accepted writes whose token is below an earlier accepted write's for the same lock, in
  // the store's commit order.
  int stale_accepted = 0;
  // (b) Writes a client saw acknowledged that the store's log does not hold as accepted.
  int missing_acknowledged = 0;
  // (c) Increments lost: per counter key, the accepted increments (acknowledged, or found in
  // the store's log) minus the final value (at most all of them, for a counter below 0).
  int lost_updates = 0;
  // Leases that ran out while their holder still used them (a pause outlived the lease).
  int expired_leases = 0;
  int acknowledged_writes = 0;
  std::vector<std::string> violations;  // one sentence per finding, for the report

  bool ok() const { return stale_accepted == 0 && missing_acknowledged == 0 && lost_updates == 0; }
};

// Counter keys are those of "write" operations; "claim" writes are checked by (a) and (b) only.
CheckReport CheckHistory(const CheckInput& input);

}  // namespace fencekit::pausetest
