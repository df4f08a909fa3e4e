// A timeline: what happened, when, to whom; and three ways to show it. Drawn by the demo (its
// four lanes) and by the pause-test kit for a failing run (a lane per worker).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fencekit::timeline {

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
  kUnknown,   // a write whose outcome is unknown (timed out, connection lost)
  kRelease,   // the client released its lease (ends its lease bar)
  kOverwrite,  // the store accepted a write that overwrote a newer one: harm, a lost update
  kArrive,     // a write held in the network reached the store (holder: whose; ends the hold)
};
// Its name in the JSON and the live page's feed ("grant", "refused", "overwrite", ...).
const char* KindName(Kind k);
// A process's exit is a kNote.

struct Event {
  std::int64_t time_ms = 0;
  std::string actor;  // a lane's id: "A", "B", "lock service", "store", "worker 0", ...
  std::string event;
  std::optional<std::int64_t> token;
  std::string status;
  Kind kind = Kind::kNote;
  std::string holder;    // kExpire: whose lease ran out; kArrive: whose write (a lane's id)
  bool flagged = false;  // drawn circled in red with a bold label: what a check named
  // Set: the event took from time_ms to end_ms (an operation), drawn in the HTML as a bar that
  // long on its lane, in its kind's colour.
  std::optional<std::int64_t> end_ms;
};

// A table printed above the HTML drawing, e.g. the operations a check named; cells are text.
struct Table {
  std::string caption;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

// A lane of the diagram. A client's lane (`client`) carries lease bars (from its kGrant to a
// kExpire naming it as holder, or its kLost or kRelease), and its writes' labels name no token
// (Label).
struct Lane {
  std::string id;  // what an Event's actor says
  std::string title;
  bool client = false;
};

struct Timeline {
  std::string scenario;
  bool fencing = true;
  std::vector<Event> events;  // in time order
  std::string final_value;
  std::string verdict;
  bool lesson_shown = false;
  // Empty: the demo's four lanes (Lanes(), titled by LaneTitle). An event whose actor names no
  // lane is left out of the terminal and the HTML (not of the JSON).
  std::vector<Lane> lanes;
  // The HTML page's <title> and <h1>; empty: "fencekit demo: <scenario> (fencing on/OFF)".
  std::string title;
  // The HTML note's line when an event is flagged; empty: "Circled in red: the operations the
  // check named."
  std::string flagged_legend;
  Table table;         // shown when it has rows
  std::string legend;  // a line of the HTML note, shown when set
};

// The demo's lanes, in order: "A", "B", "lock service", "store".
const std::vector<std::string>& Lanes();
// The lanes drawn: `t.lanes`, or the demo's with their titles (A and B are clients).
std::vector<Lane> LanesOf(const Timeline& t);
// A lane's title: "Client A", "Lock service", "Storage (fenced)"; a store that does not check
// tokens (`fencing` false) is "Storage (no fencing)".
std::string LaneTitle(const std::string& actor, bool fencing);
// What a reader sees of an event (the terminal, the HTML timeline, the --serve page), said
// once: "refuses A's write, token 1: it has seen token 2" on the store's lane, and only
// "writes" on A's, at the same moment. A client's events name no token (the lock service's
// grant and the client's lease bar do), nor does a read (the value does). The first form takes
// the demo's clients, "A" and "B"; the second says whether the event's lane is a client's.
std::string Label(const Event& e);
std::string Label(const Event& e, bool client);

// A column per lane, in colour when `colour`.
std::string RenderTerminal(const Timeline& t, bool colour);
// {"scenario","fencing","events":[{"time_ms","actor","event","token","status","kind"}],
//  "final_value","verdict","lesson_shown"}; an event also has "flagged":true when flagged, and
// the root "title" and "lanes":[{"id","title","client"}] when they are set.
std::string RenderJson(const Timeline& t);
// A standalone page (inline SVG, no network resources) drawing lanes, lease bars, the pause
// and the writes, like Kleppmann's figure, on a time-proportional axis (LayOutTime) with labels
// that never overlap and whose leader lines cross no label (PlaceLabels), a legend of what is
// drawn, and the drawing as wide as its longest label needs. A long run makes a wide drawing:
// when an event is flagged, the drawing scrolls inside the page's width and opens scrolled to
// the first flagged event (id "first-flagged").
std::string RenderHtml(const Timeline& t);
// The drawing alone, as a standalone SVG file (white background, lane titles included) whose
// type is `font_px` high (the page's is 11): for slides.
std::string RenderSvg(const Timeline& t, int font_px = 22);

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

// Rows (0: nearest the lane's line) for labels above a lane, each joined to its mark at `xs[i]`
// (non-decreasing) by a vertical leader line, its text spanning [xs[i] + kLabelOffset,
// xs[i] + kLabelOffset + widths[i]). No two labels of a row come closer than `gap`; no leader
// line crosses a label: a label stands above every later label whose leader falls under it or
// that marks the same moment, so labels that stack read top-down in time order. Linear in the labels times the labels
// whose leaders fall under one label.
constexpr int kLabelOffset = 3;
std::vector<int> PlaceLabels(const std::vector<int>& xs, const std::vector<int>& widths, int gap);

}  // namespace fencekit::timeline
