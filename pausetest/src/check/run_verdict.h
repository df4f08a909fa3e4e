// How one run of `fencectl pause-test --worker` is judged, keeping apart a run that passed, a
// run its check judged wrong (a violation: exit 4) and a run the harness could not judge (a
// worker or check that cannot be started, a malformed or out-of-time history, nothing recorded,
// a check that ran out of time or was killed: exit 1, with what to fix).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fencekit/pausetest/worker_runner.h"
#include "run/run_timeline.h"

namespace fencekit::pausetest {

enum class RunVerdict { kPassed, kFailed, kNotJudged };

struct Judgement {
  RunVerdict verdict = RunVerdict::kPassed;
  std::string why;     // kFailed: the violation, in a few lines; kNotJudged: what to fix
  int operations = 0;  // what the check judged (WorkerTestOptions::min_operations)
};

// The run's wall-clock span, microseconds since the epoch: from before its setup to after its
// clients stopped. A recorded time more than kTimeSlackUs outside it is the worker's mistake.
struct RunWindow {
  std::int64_t from_us = 0;
  std::int64_t to_us = 0;
};
inline constexpr std::int64_t kTimeSlackUs = 60'000'000;

// When the run's invocations show that the --worker command cannot run, why (with its exit
// status and the last lines of its log): one that could not be started (exit 126 or 127), or
// none that exited 0 so far (`ok_before`: invocations of earlier runs that did). Else empty.
std::string WorkerCannotRun(const RunRecord& record, int ok_before, const std::string& dir);

// Merges the setup's and each client's history files in `dir` into dir/history.jsonl, in order
// of start (record.ops; each op's line is its line there), then judges them: `o.check` with
// `env` and FENCEKIT_HISTORY, or the built-in linearizability check (record.flagged gets what
// it named).
Judgement JudgeRun(const WorkerTestOptions& o,
                   const std::vector<std::pair<std::string, std::string>>& env,
                   const std::string& dir, RunWindow window, RunRecord& record);

// The user's text in a message: valid UTF-8, no control characters but newlines, no trailing
// newline.
std::string Quote(const std::string& text);

// The last `max_lines` lines of the file at `path` (at most its last 1 KiB), quoted, each
// indented by two spaces; "" when it is missing or empty.
std::string LastLines(const std::string& path, int max_lines = 5);

}  // namespace fencekit::pausetest
