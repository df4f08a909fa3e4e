// VisitorWrites: a decision of fenced after the scenario (one of the visitor's own writes, as
// fenced's feed sends it) as an event of the demo's story, on the store's lane and said as the
// scenario's writes are: "refuses a write to shared-record, token 1: it has seen token 7".
// Names from the feed are the visitor's (or any local client's): they stay text, cut to
// kMaxNameBytes, and percent-encoded ones are said to be.
// Thread safety: one thread at a time.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "scenario/timeline_names.h"

namespace fencekit::demo {

class VisitorWrites {
 public:
  static constexpr std::size_t kMaxNameBytes = 80;

  // `start`: when the scenario's clock started. `lock`: the demo's lock, named only when a
  // write is under another. `highest`: the highest token accepted for it so far, so that a
  // store without fencing can be seen accepting a lower one.
  VisitorWrites(std::chrono::system_clock::time_point start, std::string lock, bool fencing,
                std::int64_t highest);

  // nullopt for what is not a write decision. Times never go back: a decision stamped before
  // the last one (fenced's clock is the system's) is placed at the last one's time.
  std::optional<Event> ToEvent(const boost::json::object& decision);

 private:
  std::chrono::system_clock::time_point start_;
  std::string lock_;
  bool fencing_;
  std::int64_t highest_;
  std::int64_t last_ms_ = 0;
};

}  // namespace fencekit::demo
