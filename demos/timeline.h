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

// One lane per actor, in colour when `colour`.
std::string RenderTerminal(const Timeline& t, bool colour);
// {"scenario","fencing","events":[{"time_ms","actor","event","token","status"}],
//  "final_value","verdict","lesson_shown"}
std::string RenderJson(const Timeline& t);
// A standalone page (inline SVG, no network resources) drawing lanes, lease bars, the pause
// and the writes, like Kleppmann's figure.
std::string RenderHtml(const Timeline& t);

}  // namespace fencekit::demo
