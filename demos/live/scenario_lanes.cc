#include "live/scenario_lanes.h"

namespace fencekit::demo {

const char* ScenarioNames() {
  return "gc-pause, slow-network, lock-service-restart, clock-jump or check-then-write";
}

bool IsScenario(const std::string& name) {
  return name == "gc-pause" || name == "slow-network" || name == "lock-service-restart" ||
         name == "clock-jump" || name == "check-then-write";
}

std::string NodeLane(int i) { return "node " + std::to_string(i); }

std::vector<timeline::Lane> ScenarioLanes(const std::string& scenario, bool fencing) {
  std::vector<timeline::Lane> lanes;
  for (const auto& id : timeline::Lanes()) {
    if (scenario == "clock-jump" && id == "lock service") {
      for (int i = 1; i <= 5; ++i)
        lanes.push_back({NodeLane(i), "Redis node " + std::to_string(i)});
      continue;
    }
    std::string title = timeline::LaneTitle(id, fencing);
    if (scenario == "check-then-write" && id == "store") {
      title = fencing ? "Storage (checks, then writes)" : "Storage (no check)";
    }
    lanes.push_back({id, title, id == "A" || id == "B"});
  }
  return lanes;
}

}  // namespace fencekit::demo
