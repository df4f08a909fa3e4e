#include "run/run_timeline.h"

#include <algorithm>
#include <cstdio>

#include "fencekit/common/text.h"

#include "fencekit/timeline/timeline.h"

namespace fencekit::pausetest {
namespace {

using timeline::Kind;

std::string Lane(int client) { return "worker " + std::to_string(client); }

std::string Text(const std::optional<std::string>& v) { return v ? *v : "absent"; }

// What the page says of one recorded operation.
std::string OpLabel(const RegisterOp& op) {
  std::string s;
  switch (op.kind) {
    case RegisterOp::Kind::kRead:
      s = "read " + op.key + " = " + Text(op.value);
      break;
    case RegisterOp::Kind::kWrite:
      s = "write " + op.key + " := " + Text(op.value);
      break;
    case RegisterOp::Kind::kCas:
      s = "cas " + op.key + " " + Text(op.from) + " -> " + Text(op.value);
      break;
  }
  return s;
}

const char* Outcome(const RegisterOp& op) {
  return op.outcome == RegisterOp::Outcome::kOk     ? "ok"
         : op.outcome == RegisterOp::Outcome::kFail ? "fail"
                                                    : "unknown";
}

// "1.234": seconds with milliseconds.
std::string Seconds(std::int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(us) / 1e6);
  return buf;
}

}  // namespace

std::string RenderRunTimeline(const RunRecord& r) {
  timeline::Timeline t;
  t.scenario = "run " + std::to_string(r.run);
  t.title = "fencekit pause-test: run " + std::to_string(r.run) + " (seed " +
            std::to_string(r.seed) + ", lock " + JsonSafeText(r.lock) + ") " +
            (r.judged ? "failed" : "not judged");
  t.verdict = r.verdict;
  t.legend =
      "Each recorded operation is a bar from its start to its end: green ok, red fail, grey "
      "unknown." +
      std::string(r.holds.empty() ? ""
                                  : " A hold (--holds) is a bar as long as the worker's traffic "
                                    "waited in the kit's proxies, both ways.");
  t.flagged_legend =
      "Circled in red: the operations the check could not order, listed in the table above "
      "(lines of history.jsonl).";
  const bool setup =
      std::any_of(r.ops.begin(), r.ops.end(), [](const RegisterOp& op) { return op.client < 0; });
  if (setup) t.lanes.push_back({"setup", "Setup", false});
  for (std::size_t c = 0; c < r.kit.size(); ++c) {
    t.lanes.push_back({Lane(static_cast<int>(c)), "Worker " + std::to_string(c), true});
  }
  t.lanes.push_back({"lock service", "Lock service", false});  // the lock is in the title
  auto ms = [&](std::int64_t us) { return (us - r.origin_us) / 1000; };
  auto add = [&](std::int64_t us, const std::string& actor, std::string text, Kind kind,
                 std::optional<std::int64_t> token = std::nullopt) {
    timeline::Event e;
    e.time_ms = ms(us);
    e.actor = actor;
    e.event = std::move(text);
    e.token = token;
    e.kind = kind;
    t.events.push_back(std::move(e));
    return t.events.size() - 1;
  };
  for (const auto& p : r.pauses) {
    add(p.start_us, Lane(p.target), "SIGSTOP", Kind::kPause);
    add(p.end_us, Lane(p.target), "SIGCONT", Kind::kResume);
  }
  for (const auto& f : r.lock_faults) add(f.at_us, "lock service", f.what, Kind::kRestart);
  // A hold: a bar as long as the client's traffic waited in its proxies, both ways.
  for (const auto& h : r.holds) {
    std::size_t i = add(h.start_us, Lane(h.target),
                        "traffic held in the network for " +
                            std::to_string((h.end_us - h.start_us) / 1000) + "ms",
                        Kind::kSend);
    t.events[i].end_ms = ms(h.end_us);
  }
  for (std::size_t c = 0; c < r.kit.size(); ++c) {
    const std::string lane = Lane(static_cast<int>(c));
    for (const auto& e : r.kit[c]) {
      if (e.event == "grant") {
        add(e.at_us, lane, "acquires", Kind::kGrant, e.token);
        add(e.at_us, "lock service", "grants " + lane, Kind::kGrant, e.token);
      } else if (e.event == "worker" && e.failed) {
        add(e.at_us, lane, "worker: " + e.detail, Kind::kLost);
      } else if (e.event == "expired") {
        std::size_t i =
            add(e.at_us, "lock service", "lease of " + lane + " expires", Kind::kExpire, e.token);
        t.events[i].holder = lane;
      } else if (e.event == "release") {
        add(e.at_us, lane, e.detail == "ok" ? "releases" : "release: " + e.detail, Kind::kRelease);
      } else if (e.event == "error") {
        add(e.at_us, lane, "lock service: " + e.detail, Kind::kNote);
      }
    }
  }
  std::vector<bool> flagged(r.ops.size(), false);
  for (std::size_t i : r.flagged) {
    if (i < flagged.size()) flagged[i] = true;
  }
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const RegisterOp& op = r.ops[i];
    const Kind kind = op.outcome == RegisterOp::Outcome::kOk     ? Kind::kAccepted
                      : op.outcome == RegisterOp::Outcome::kFail ? Kind::kRefused
                                                                 : Kind::kUnknown;
    const char* outcome = Outcome(op);
    std::size_t at = add(op.start_us, op.client < 0 ? "setup" : Lane(op.client),
                         OpLabel(op) + " (" + outcome + ")", kind);
    t.events[at].end_ms = ms(op.end_us);
    t.events[at].flagged = flagged[i];
  }
  // What the check named, beside the drawing, in time order.
  t.table.caption = "The operations the check named (times in s since the run's start)";
  t.table.head = {"client", "op", "key", "from", "value", "outcome", "start", "end", "line"};
  std::vector<std::size_t> named = r.flagged;
  std::sort(named.begin(), named.end(), [&](std::size_t a, std::size_t b) {
    return r.ops[a].start_us < r.ops[b].start_us;
  });
  for (std::size_t i : named) {
    if (i >= r.ops.size()) continue;
    const RegisterOp& op = r.ops[i];
    const bool cas = op.kind == RegisterOp::Kind::kCas;
    t.table.rows.push_back(
        {op.client < 0 ? "setup" : std::to_string(op.client),
         op.kind == RegisterOp::Kind::kRead    ? "read"
         : op.kind == RegisterOp::Kind::kWrite ? "write"
                                               : "cas",
         JsonSafeText(op.key), cas ? JsonSafeText(Text(op.from)) : "",
         JsonSafeText(Text(op.value)), Outcome(op), Seconds(op.start_us - r.origin_us),
         Seconds(op.end_us - r.origin_us),
         op.line > 0 ? "history.jsonl " + std::to_string(op.line) : ""});
  }
  std::stable_sort(
      t.events.begin(), t.events.end(),
      [](const timeline::Event& a, const timeline::Event& b) { return a.time_ms < b.time_ms; });
  return timeline::RenderHtml(t);
}

}  // namespace fencekit::pausetest
