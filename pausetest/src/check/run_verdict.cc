#include "check/run_verdict.h"

#include <sys/wait.h>

#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <iterator>

#include "fencekit/common/text.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/pausetest/linearizability.h"
#include "worker/shell_command.h"

namespace fencekit::pausetest {
namespace {

// Real time (not Clock): the check's limit is a real process's budget of real time.
using SteadyClock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kMergedHistory = "history.jsonl";

std::string HistoryFile(int client) {
  return client < 0 ? "setup.history.jsonl" : "client-" + std::to_string(client) + ".history.jsonl";
}

std::string OpLine(const RegisterOp& op) {
  auto value = [](const std::optional<std::string>& v) -> boost::json::value {
    if (v) return boost::json::value(*v);
    return nullptr;
  };
  boost::json::object o;
  o["client"] = op.client;
  o["op"] = op.kind == RegisterOp::Kind::kRead    ? "read"
            : op.kind == RegisterOp::Kind::kWrite ? "write"
                                                  : "cas";
  o["key"] = op.key;
  if (op.kind == RegisterOp::Kind::kCas) o["from"] = value(op.from);
  o["value"] = value(op.value);
  o["start_us"] = op.start_us;
  o["end_us"] = op.end_us;
  o["outcome"] = op.outcome == RegisterOp::Outcome::kOk     ? "ok"
                 : op.outcome == RegisterOp::Outcome::kFail ? "fail"
                                                            : "unknown";
  return boost::json::serialize(o);
}

// Why a recorded time of `op` (line op.line of `file`) lies outside the run, or "". A time off
// by a factor of 1000 or 10^6 is named as the unit it looks like.
std::string OutsideTheRun(const std::string& file, const RegisterOp& op, RunWindow w) {
  const long double from = static_cast<long double>(w.from_us - kTimeSlackUs);
  const long double to = static_cast<long double>(w.to_us + kTimeSlackUs);
  auto within = [&](long double t) { return t >= from && t <= to; };
  for (auto [field, t] : {std::pair{"start_us", op.start_us}, std::pair{"end_us", op.end_us}}) {
    const long double v = static_cast<long double>(t);
    if (within(v)) continue;
    std::string unit;
    if (within(v * 1e3L)) {
      unit =
          "; it looks like milliseconds (JavaScript's Date.now(), Java's "
          "System.currentTimeMillis()): multiply by 1000";
    } else if (within(v * 1e6L)) {
      unit = "; it looks like seconds: multiply by 1000000";
    } else if (within(v / 1e3L)) {
      unit = "; it looks like nanoseconds: divide by 1000";
    }
    return file + " line " + std::to_string(op.line) + ": " + field + " " + std::to_string(t) +
           " is not within the run, which ran from " + std::to_string(w.from_us) + " to " +
           std::to_string(w.to_us) + " (give or take a minute)" + unit +
           ". Times are wall-clock microseconds since the epoch (sh: date +%s%6N; Python: "
           "time.time_ns() // 1000; JavaScript: Date.now() * 1000)";
  }
  return "";
}

Judgement NotJudged(std::string why) {
  return {.verdict = RunVerdict::kNotJudged, .why = std::move(why)};
}

// Why the run's `operations` are too few to judge it, or "" when they are enough.
std::string TooFew(const WorkerTestOptions& o, const RunRecord& record, const std::string& dir,
                   int operations, int unknown) {
  const int min = o.min_operations >= 0 ? o.min_operations : (o.check.empty() ? 1 : 0);
  if (operations >= min) return "";
  const std::string logs = "client-0.log to client-" + std::to_string(record.kit.size() - 1) +
                           ".log in " + dir + ", the workers' output";
  if (!o.check.empty()) {
    return "nothing was checked: the merged history " + dir + "/" + kMergedHistory + " has " +
           Plural(operations, "line") + ", fewer than --min-operations " + std::to_string(min) +
           " (see " + logs + ")";
  }
  int invocations = 0;
  for (const auto& events : record.kit) {
    invocations += static_cast<int>(std::count_if(
        events.begin(), events.end(), [](const KitEvent& e) { return e.event == "worker"; }));
  }
  if (invocations == 0) {
    return "nothing was checked: no client got the lock in run " + std::to_string(record.run) +
           " (see the client-*.events.jsonl files in " + dir + ")";
  }
  if (operations == 0 && unknown == 0) {
    return "nothing was checked: no worker recorded an operation in " +
           Plural(invocations, "invocation") + " (see " + logs +
           "); each invocation appends what it did to $FENCEKIT_HISTORY";
  }
  return "nothing was checked: " + std::to_string(operations) +
         " operations with outcome ok or fail (and " + std::to_string(unknown) +
         " unknown) were recorded, fewer than --min-operations " + std::to_string(min) + " (see " +
         logs + ")";
}

// Runs the user's --check on the merged history.
Judgement RunCheck(const WorkerTestOptions& o, Env env, const std::string& dir, int run) {
  env.push_back({"FENCEKIT_HISTORY", dir + "/" + kMergedHistory});
  auto checked = RunShell(o.check, ShellEnvironment(env), o.check_timeout, dir + "/check.log");
  if (!checked.ok()) return NotJudged("--check could not run: " + checked.status().message());
  const std::string output = checked->output.empty() ? "" : ":\n" + Quote(checked->output);
  const std::string in_run = " in run " + std::to_string(run);
  if (checked->timed_out) {
    return NotJudged("--check ran out of time" + in_run + ": still running after --check-timeout " +
                     std::to_string(o.check_timeout.count()) +
                     "ms, so it was killed before it "
                     "judged the run; raise --check-timeout or make the check faster" +
                     output);
  }
  const int status = checked->wait_status;
  if (WIFSIGNALED(status)) {
    return NotJudged("--check was killed by signal " + std::to_string(WTERMSIG(status)) + in_run +
                     ", so it did not judge the run (out of memory? a crash?)" + output);
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (code == 126 || code == 127) {
    return NotJudged(
        "--check cannot be started" + in_run + ": exit " + std::to_string(code) +
        (code == 127 ? ", the shell found no such command" : ", the command is not executable") +
        "; fix the command (it runs through sh -c)" + output);
  }
  if (code > 128) {
    return NotJudged("--check exit " + std::to_string(code) + in_run +
                     ": the shell's way of saying its command was killed by signal " +
                     std::to_string(code - 128) + ", so it did not judge the run" + output);
  }
  if (code != 0) {
    return {.verdict = RunVerdict::kFailed, .why = "--check " + checked->Describe() + output};
  }
  return {};
}

}  // namespace

std::string Quote(const std::string& text) {
  std::string out;
  for (char c : JsonSafeText(text)) {
    out += (static_cast<unsigned char>(c) < 0x20 && c != '\n') ? '?' : c;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string LastLines(const std::string& path, int max_lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 1024));
  std::string tail(std::istreambuf_iterator<char>(in), {});
  if (size > 1024) {  // a cut first line is left out
    const std::size_t nl = tail.find('\n');
    tail = nl == std::string::npos ? "" : tail.substr(nl + 1);
  }
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  std::vector<std::string> lines;
  for (std::size_t from = 0; from <= tail.size() && !tail.empty();) {
    const std::size_t nl = std::min(tail.find('\n', from), tail.size());
    lines.push_back(tail.substr(from, nl - from));
    from = nl + 1;
  }
  std::string out;
  const std::size_t first = lines.size() > static_cast<std::size_t>(max_lines)
                                ? lines.size() - static_cast<std::size_t>(max_lines)
                                : 0;
  for (std::size_t i = first; i < lines.size(); ++i) out += "\n  " + Quote(lines[i]);
  return out;
}

std::string WorkerCannotRun(const RunRecord& record, int ok_before, const std::string& dir) {
  int invocations = 0, ok = 0;
  const KitEvent* last_failed = nullptr;
  int last_failed_client = 0;
  for (std::size_t c = 0; c < record.kit.size(); ++c) {
    const std::string log = dir + "/client-" + std::to_string(c) + ".log";
    for (const KitEvent& e : record.kit[c]) {
      if (e.event != "worker") continue;
      ++invocations;
      ok += !e.failed;
      if (e.exit_code == 126 || e.exit_code == 127) {
        std::string tail = LastLines(log);
        return "the --worker command cannot be started: client " + std::to_string(c) +
               "'s invocation in run " + std::to_string(record.run) + " ended with exit " +
               std::to_string(e.exit_code) +
               (e.exit_code == 127 ? ", the shell found no such command"
                                   : ", the command is not executable") +
               "; fix the command (it runs through sh -c)" +
               (tail.empty() ? "" : "; the last lines of " + log + ":" + tail);
      }
      if (e.failed) {
        last_failed = &e;
        last_failed_client = static_cast<int>(c);
      }
    }
  }
  if (invocations == 0 || ok_before + ok > 0 || last_failed == nullptr) return "";
  const std::string log = dir + "/client-" + std::to_string(last_failed_client) + ".log";
  const std::string tail = LastLines(log);
  return "no worker invocation exited 0 in run " + std::to_string(record.run) +
         ": the --worker command fails (" + Plural(invocations, "invocation") +
         ", the last ended with " + last_failed->detail + "); see " + dir + "/client-*.log" +
         (tail.empty() ? "" : "; the last lines of " + log + ":" + tail);
}

Judgement JudgeRun(const WorkerTestOptions& o, const Env& env, const std::string& dir,
                   RunWindow window, RunRecord& record) {
  // The setup's history (client -1) and every client's, each checked as it is read.
  std::vector<int> clients = {-1};
  for (std::size_t c = 0; c < record.kit.size(); ++c) clients.push_back(static_cast<int>(c));
  for (int client : clients) {
    const std::string file = HistoryFile(client);
    auto ops = ReadRegisterHistory(dir + "/" + file, client);
    if (!ops.ok()) {
      return NotJudged("a worker recorded a malformed history line: " + ops.status().message() +
                       "; each line must be one JSON object as docs/testing-with-pauses.md "
                       "(\"The history\") shows");
    }
    for (const RegisterOp& op : *ops) {
      if (std::string why = OutsideTheRun(file, op, window); !why.empty()) return NotJudged(why);
    }
    record.ops.insert(record.ops.end(), ops->begin(), ops->end());
  }
  std::stable_sort(
      record.ops.begin(), record.ops.end(),
      [](const RegisterOp& a, const RegisterOp& b) { return a.start_us < b.start_us; });
  {
    std::ofstream merged(dir + "/" + kMergedHistory);
    for (std::size_t i = 0; i < record.ops.size(); ++i) {
      record.ops[i].line = static_cast<int>(i) + 1;  // messages name lines of the merged file
      merged << OpLine(record.ops[i]) << "\n";
    }
  }

  Judgement j;
  int unknown = 0;
  if (!o.check.empty()) {
    j = RunCheck(o, env, dir, record.run);
    j.operations = static_cast<int>(record.ops.size());
  } else {
    for (const RegisterOp& op : record.ops) {
      if (op.client < 0) continue;  // the setup's starting values judge nothing
      if (op.outcome == RegisterOp::Outcome::kUnknown) {
        ++unknown;
      } else {
        ++j.operations;
      }
    }
    auto report = CheckLinearizable(record.ops, SteadyClock::now() + o.check_timeout, nullptr,
                                    record.origin_us, kMergedHistory);
    if (report.verdict == LinearizabilityReport::Verdict::kUndecided) {
      j.verdict = RunVerdict::kNotJudged;
      j.why = "the built-in check could not decide run " + std::to_string(record.run) +
              " within --check-timeout " + std::to_string(o.check_timeout.count()) +
              "ms and its memory bound; raise --check-timeout, or record fewer operations per "
              "run (a shorter --run-length): " +
              report.message;
    } else if (!report.ok()) {
      j.verdict = RunVerdict::kFailed;
      j.why = report.message;
      record.flagged = report.window;
    }
  }
  // A violation found stands; a pass on too little is no pass.
  if (j.verdict == RunVerdict::kPassed) {
    if (std::string why = TooFew(o, record, dir, j.operations, unknown); !why.empty()) {
      j.verdict = RunVerdict::kNotJudged;
      j.why = why;
    }
  }
  return j;
}

}  // namespace fencekit::pausetest
