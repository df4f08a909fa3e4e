// The demo's timeline: what happened, when, to whom; and three ways to show it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fencekit::demo {

// What an event means on the diagram.
enum class Kind {
  kNote,      // plain text
  kGrant,     // the lock service granted a lease (token)
  kExpire,    // a lease ran out on the lock service
  kPause,     // the process was frozen (SIGSTOP)
  kResume,    // the process was thawed (SIGCONT)
  kSend,      // a write left the client (slow-network: it is delayed in flight)
  kAccepted,  // the store accepted a write
  kRefused,   // the store refused a write as stale
  kRead,      // a read
  kLost,      // the client learned its lease is lost
  kRestart,   // the lock service restarted
};

struct Event {
  std::int64_t time_ms = 0;
  std::string actor;  // "A", "B", "lock service", "store"
  std::string event;
  std::optional<std::int64_t> token;
  std::string status;
  Kind kind = Kind::kNote;
  std::string holder;  // kExpire: whose lease ran out (drawn, not exported)
};

struct Timeline {
  std::string scenario;
  bool fencing = true;
  std::vector<Event> events;
  std::string final_value;
  std::string verdict;
  bool lesson_shown = false;
};

// The lanes, in order: "A", "B", "lock service", "store".
const std::vector<std::string>& Lanes();
// A lane's title: "Client A", "Lock service", "Storage (fenced)"; a store that does not check
// tokens (`fencing` false) is "Storage (no fencing)".
std::string LaneTitle(const std::string& actor, bool fencing);
// What a reader sees of an event (the terminal, the HTML timeline, the --serve page), said
// once: "refuses A's write, token 1: it has seen token 2" on the store's lane, and only
// "writes" on A's, at the same moment. A client's events name no token (the lock service's
// grant and the client's lease bar do), nor does a read (the value does).
std::string Label(const Event& e);

// One lane per actor, in colour when `colour`.
std::string RenderTerminal(const Timeline& t, bool colour);
// {"scenario","fencing","events":[{"time_ms","actor","event","token","status"}],
//  "final_value","verdict","lesson_shown"}
std::string RenderJson(const Timeline& t);
// A standalone page (inline SVG, no network resources) drawing lanes, lease bars, the pause
// and the writes, like Kleppmann's figure, on a time-proportional axis (LayOutTime) with labels
// that never overlap (StackLabels).
std::string RenderHtml(const Timeline& t);

// The HTML timeline's time axis. Events at the same time share their x (the store's refusal
// and the write it refuses are one moment). Otherwise each event's x is proportional to its
// time (kPxPerMs), but never closer than kMinStep to the one before (events a millisecond apart
// stay readable), and a wait longer than kBreakMs is drawn as a break of kBreakWidth, labelled
// with its length (a pause of a second would otherwise dwarf everything else).
struct AxisBreak {
  int x = 0;  // left edge
  std::int64_t ms = 0;
};
struct TimeAxis {
  std::vector<int> x;  // one per event, non-decreasing
  std::vector<AxisBreak> breaks;
  int end = 0;  // x of the last event
  static constexpr double kPxPerMs = 6;
  static constexpr int kMinStep = 40;
  static constexpr std::int64_t kBreakMs = 60;
  static constexpr int kBreakWidth = 70;
};
// `times_ms` in order; the first event sits at `left`.
TimeAxis LayOutTime(const std::vector<std::int64_t>& times_ms, int left);

// Rows for labels that must not overlap: label i spans [from, to) horizontally; it goes to the
// lowest row where it starts at least `gap` after the end of every label already there.
std::vector<int> StackLabels(const std::vector<std::pair<int, int>>& spans, int gap);

}  // namespace fencekit::demo
