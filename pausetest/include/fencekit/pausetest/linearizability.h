// Whether a history of register operations (register_history.h) is linearizable, key by key, as
// the "cas-register" model of Jepsen and Knossos: each key is a register, initially absent, that
// reads, writes and compare-and-sets act on atomically.
//
// Ops with outcome "ok" must take effect at one instant within [start_us, end_us] (closed: ops
// that touch at an instant may take effect in either order). "fail" ops and "unknown" reads are
// left out; an "unknown" write or cas takes effect at any instant after its start, or never.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/pausetest/register_history.h"

namespace fencekit::pausetest {

struct LinearizabilityReport {
  enum class Verdict { kLinearizable, kNotLinearizable, kUndecided };
  Verdict verdict = Verdict::kLinearizable;
  // The key that is not linearizable (or, with no such key, the first that is undecided).
  std::string key;
  // Indices into the checked ops, in time order: the smallest window of the key's consecutive
  // ops that cannot be ordered; all the key's ops when the time ran out before one was found.
  std::vector<std::size_t> window;
  // A few lines: the key, the window's operations in time order (Describe), and why.
  std::string message;

  bool ok() const { return verdict == Verdict::kLinearizable; }
};

// Checks `ops` key by key. The message's times are seconds since `origin_us` (wall-clock
// microseconds, e.g. a run's start); with 0, since the reported key's first operation. After
// `deadline` on `clock` (nullptr: the real clock) the search gives up: kUndecided when no key was
// found not linearizable; the clock is read every few thousand steps, so the check overruns the
// deadline by a few milliseconds at most. Its memory is bounded too (about 256 MB of explored
// states, then kUndecided). `history_file` names the file the ops' lines count in, for the
// message (Describe). Safe to call from several threads at once.
LinearizabilityReport CheckLinearizable(const std::vector<RegisterOp>& ops,
                                        std::chrono::steady_clock::time_point deadline,
                                        Clock* clock = nullptr, std::int64_t origin_us = 0,
                                        std::string_view history_file = {});

}  // namespace fencekit::pausetest
