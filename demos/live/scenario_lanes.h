// The scenarios of fencekit-demo by name, and the lanes each one draws (the terminal, the HTML
// timeline and the --serve page draw the same).
#pragma once

#include <string>
#include <vector>

#include "scenario/timeline_names.h"

namespace fencekit::demo {

// "gc-pause, slow-network, lock-service-restart, clock-jump or check-then-write".
const char* ScenarioNames();
bool IsScenario(const std::string& name);

// "A", "B", "lock service" and "store", titled as the timeline titles them; clock-jump has a
// lane per Redis node ("node 1" to "node 5") instead of the lock service's; check-then-write's
// store, which checks a token apart from the write, is "Storage (checks, then writes)" (with
// fencing on; "Storage (no check)" without).
std::vector<timeline::Lane> ScenarioLanes(const std::string& scenario, bool fencing);

// clock-jump's lane of Redis node `i` (1-based): "node 3".
std::string NodeLane(int i);

}  // namespace fencekit::demo
