// What the timeline's renderers share (timeline.cc: the terminal and JSON; html.cc:
// the page). Internal to the timeline.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "fencekit/timeline/timeline.h"

namespace fencekit::timeline::detail {

// The drawn lanes and each lane's index by id.
struct LaneIndex {
  std::vector<Lane> lanes;
  std::unordered_map<std::string, std::size_t> by_id;

  explicit LaneIndex(const Timeline& t);
  // lanes.size() when `actor` names no lane.
  std::size_t Of(const std::string& actor) const;
  bool Has(const std::string& actor) const { return by_id.count(actor) != 0; }
};

// Appends printf's output, however long (labels are the user's text).
void Appendf(std::string& out, const char* format, ...);

// `s` with <, >, & and " as HTML entities.
std::string Escape(const std::string& s);

}  // namespace fencekit::timeline::detail
