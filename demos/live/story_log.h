// StoryLog: what the --serve page shows (demos/page/), kept so that a page opened or reloaded at
// any time gets everything since the scenario began, then the rest live. It renders the page's
// feed, Server-Sent Events:
//   hello  {"scenario","fencing","ttl_ms","lanes":[{"id","title","client"}],"state","now_ms"}: first on
//          every connection and again when the scenario begins; the page starts over on it.
//          state: "waiting" (for a viewer), "running" or "ended"; now_ms: the scenario's clock.
//   step   {"id","t","lane","kind","label","token","holder","after"}: one event at t ms of the
//          scenario's clock, on one of the hello's lanes; kind as Kind
//          ("grant", "pause", "refused", ...); holder: whose lease a kExpire ends, whose held write a
//          kArrive delivers; after: a
//          write decided by fenced after the scenario (the visitor's own).
//   end    {"verdict","lesson_shown","final_value","fencing","store_url","lock","key",
//          "highest"}: the scenario's outcome and what the visitor may try next.
//   forgotten {"writes"}: in a replay, how many earlier visitor writes were let go (below).
// Bounded: at most kMaxScenarioEvents of the scenario (one logs about 20) and the latest
// kMaxVisitorEvents of the visitor's writes, each label cut to kMaxLabelBytes; so a replay is
// under 1 MiB whatever visitors do.
// Thread safety: none; the page server uses it on its one thread.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "live/scenario_lanes.h"
#include "scenario/timeline_names.h"

namespace fencekit::demo {

class StoryLog {
 public:
  static constexpr std::size_t kMaxScenarioEvents = 256;
  static constexpr std::size_t kMaxVisitorEvents = 500;
  static constexpr std::size_t kMaxLabelBytes = 400;

  // `fencing`: whether the store checks tokens in the write (the page's banner says when not).
  // `lanes`: the hello's; empty: ScenarioLanes(scenario, fencing).
  StoryLog(std::string scenario, bool fencing, std::chrono::milliseconds ttl,
           std::vector<timeline::Lane> lanes = {});

  // Each returns the feed's text for it, to send to every open stream ("" for nothing).
  // The scenario's clock starts at `now`.
  std::string Begin(std::chrono::steady_clock::time_point now);
  // `after`: a visitor's write, decided after the scenario.
  std::string Add(const Event& e, bool after);
  std::string End(boost::json::object outcome);

  // Everything a new stream gets first: hello, then what was kept.
  std::string Replay(std::chrono::steady_clock::time_point now) const;
  bool begun() const { return begun_; }

 private:
  std::string Hello(std::chrono::steady_clock::time_point now) const;

  std::string scenario_;
  bool fencing_;
  std::chrono::milliseconds ttl_;
  std::vector<timeline::Lane> lanes_;  // the scenario's (ScenarioLanes)
  bool begun_ = false;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t next_id_ = 1;
  std::vector<std::string> scenario_events_;  // feed text, at most kMaxScenarioEvents
  std::string end_;                           // feed text of the outcome, once ended
  std::deque<std::string> visitor_events_;    // feed text, the latest kMaxVisitorEvents
  std::uint64_t forgotten_ = 0;               // visitor writes let go
};

// The kind's name in the feed ("grant", "refused", ...): KindName, but "note" for the kinds the
// page does not draw (the demo makes none of them).
const char* FeedKind(Kind k);

}  // namespace fencekit::demo
