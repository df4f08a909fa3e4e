// A failing worker run drawn as a timeline page (timeline.html in its folder): one lane per
// client (its grants, lease bars, pauses, holds of its traffic, the worker's invocations and
// recorded operations)
// and one for the lock service (grants and lease expiries).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/pausetest/register_history.h"
#include "run/run_schedule.h"
#include "worker/worker_client.h"

namespace fencekit::pausetest {

struct RunRecord {
  int run = 0;
  std::uint64_t seed = 0;
  std::string lock;
  std::int64_t origin_us = 0;  // the run's start: time 0 on the page
  std::vector<Played::Pause> pauses;
  std::vector<Played::Pause> holds;        // of a client's traffic in its proxies
  std::vector<Played::Fault> lock_faults;  // on the lock service's lane
  std::vector<std::vector<KitEvent>> kit;  // per client
  std::vector<RegisterOp> ops;             // every client's, and the setup's (client -1)
  std::vector<std::size_t> flagged;        // indices into ops: what the check named
  std::string verdict;                     // why the run failed, or could not be judged
  bool judged = true;                      // false: the harness could not judge the run
};

// A standalone HTML page (no network resources).
std::string RenderRunTimeline(const RunRecord& record);

}  // namespace fencekit::pausetest
