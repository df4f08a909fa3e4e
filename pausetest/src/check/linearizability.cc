// Wing & Gong's search for a linearization, with Lowe's improvements as Porcupine has them: the
// call and return events of one key in time order in a doubly linked list; an op is "lifted"
// out of the list when the search linearizes it and put back when it backtracks; a cache of
// (set of linearized ops, register state) prunes states already explored.
#include "fencekit/pausetest/linearizability.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "fencekit/common/text.h"

namespace fencekit::pausetest {

namespace {

using Kind = RegisterOp::Kind;
using Outcome = RegisterOp::Outcome;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr int kAbsent = 0;  // interned values: 0 is absent, 1.. the key's distinct texts
constexpr int kAny = -1;    // a window's initial state, not yet observed (SmallestWindow)
constexpr std::uint64_t kCheckClockEvery = 4096;
// The cache's bound, in 64-bit words of linearized-op sets: 256 MB.
constexpr std::size_t kMaxCacheWords = std::size_t{32} << 20;

// One op of one key as the search sees it.
struct KeyOp {
  std::size_t index = 0;  // into the caller's ops
  Kind kind = Kind::kRead;
  int value = kAbsent;
  int from = kAbsent;
  std::int64_t start = 0;
  std::int64_t end = 0;  // kNever for an optional op
  // May take effect at any instant after start, or never: an "unknown" write or cas.
  bool optional = false;
};

// The values a kAny state may be: absent, or one an op started writing before `written_before`.
struct InitialValues {
  const std::vector<std::int64_t>* first_write_at = nullptr;  // per value
  std::int64_t written_before = 0;
};

enum class SearchResult { kYes, kNo, kOutOfTime, kOutOfMemory };

// The deadline, read every kCheckClockEvery steps.
// Thread safety: not safe for concurrent use; one per check.
class Budget {
 public:
  Budget(Clock* clock, std::chrono::steady_clock::time_point deadline)
      : clock_(clock), deadline_(deadline) {}
  bool Expired() {
    if (expired_) return true;
    if (++steps_ % kCheckClockEvery == 0) expired_ = clock_->Now() > deadline_;
    return expired_;
  }
  bool ExpiredNow() {
    expired_ = expired_ || clock_->Now() > deadline_;
    return expired_;
  }

 private:
  Clock* clock_;
  std::chrono::steady_clock::time_point deadline_;
  std::uint64_t steps_ = 0;
  bool expired_ = false;
};

std::uint64_t Mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The register's step: the state after `op` from `state`, or nullopt when op cannot take effect
// there. From kAny, the first op that observes the state fixes it to any value `initial` allows
// (choosing the initial value lazily is the same as trying each: nothing changed it before).
std::optional<int> Step(int state, const KeyOp& op, const InitialValues& initial) {
  auto allowed = [&](int v) {
    return v == kAbsent || (*initial.first_write_at)[v] < initial.written_before;
  };
  switch (op.kind) {
    case Kind::kRead:
      if (state == kAny) return allowed(op.value) ? std::optional<int>(op.value) : std::nullopt;
      return state == op.value ? std::optional<int>(state) : std::nullopt;
    case Kind::kWrite:
      return op.value;
    case Kind::kCas:
      if (state == kAny) return allowed(op.from) ? std::optional<int>(op.value) : std::nullopt;
      return state == op.from ? std::optional<int>(op.value) : std::nullopt;
  }
  return std::nullopt;
}

// Whether `ops` (one key's) linearize from `initial_state` (kAbsent, or kAny with `initial`
// saying which values it may be).
SearchResult Linearize(const std::vector<KeyOp>& ops, int initial_state,
                       const InitialValues& initial, Budget& budget) {
  const int n = static_cast<int>(ops.size());
  // Entries: the call of op i, then the return of each op that is not optional (an optional op
  // need not take effect, so nothing forces it into the linearization).
  struct Event {
    std::int64_t time;
    bool is_return;
    int op;
  };
  std::vector<Event> events;
  events.reserve(2 * ops.size());
  for (int i = 0; i < n; ++i) {
    events.push_back({ops[i].start, false, i});
    if (!ops[i].optional) events.push_back({ops[i].end, true, i});
  }
  // At equal times calls come first: intervals are closed.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.is_return != b.is_return) return !a.is_return;
    return a.op < b.op;
  });
  // Within each run of calls between two returns, optional ops last: every call in a run can be
  // linearized at the same moments, so the search stays complete, and it tries the ops that
  // must take effect before those that may never.
  for (auto run = events.begin(); run != events.end();) {
    auto end = std::find_if(run, events.end(), [](const Event& e) { return e.is_return; });
    std::stable_partition(run, end, [&](const Event& e) { return !ops[e.op].optional; });
    run = end == events.end() ? end : end + 1;
  }
  const int count = static_cast<int>(events.size());
  const int head = count, tail = count + 1;
  std::vector<int> next(count + 2), prev(count + 2), match(count, -1);
  std::vector<int> call_of(n, -1);
  for (int e = 0; e < count; ++e) {
    prev[e] = e == 0 ? head : e - 1;
    next[e] = e + 1 == count ? tail : e + 1;
    if (!events[e].is_return) call_of[events[e].op] = e;
  }
  next[head] = count == 0 ? tail : 0;
  prev[tail] = count == 0 ? head : count - 1;
  for (int e = 0; e < count; ++e) {
    if (events[e].is_return) match[call_of[events[e].op]] = e;
  }
  auto unlink = [&](int e) {
    next[prev[e]] = next[e];
    prev[next[e]] = prev[e];
  };
  auto relink = [&](int e) {  // in the reverse order of unlink
    next[prev[e]] = e;
    prev[next[e]] = e;
  };

  // The cache: sets of linearized ops (as bitsets in `pool`) with the state after them, by a
  // hash of both; the set's hash is the XOR of its ops' (Zobrist hashing), kept as ops come and
  // go.
  const std::size_t words = (ops.size() + 63) / 64;
  std::vector<std::uint64_t> linearized(words, 0);
  std::uint64_t set_hash = 0;
  std::vector<std::uint64_t> pool;
  std::unordered_map<std::uint64_t, std::vector<std::pair<int, std::size_t>>> cache;
  auto flip = [&](int op) {
    linearized[op / 64] ^= std::uint64_t{1} << (op % 64);
    set_hash ^= Mix(static_cast<std::uint64_t>(op));
  };
  // Adds the current set with `state`; false when it was there already.
  auto remember = [&](int state) {
    std::uint64_t h = set_hash ^ Mix(Mix(static_cast<std::uint64_t>(state) + 0x5bd1e995));
    auto& bucket = cache[h];
    for (const auto& [s, at] : bucket) {
      if (s == state && std::equal(linearized.begin(), linearized.end(), pool.begin() + at)) {
        return false;
      }
    }
    bucket.emplace_back(state, pool.size());
    pool.insert(pool.end(), linearized.begin(), linearized.end());
    return true;
  };

  struct Frame {
    int call;
    int state_before;
  };
  std::vector<Frame> stack;
  int state = initial_state;
  int e = next[head];
  while (next[head] != tail) {
    if (budget.Expired()) return SearchResult::kOutOfTime;
    if (e == tail) return SearchResult::kYes;  // only optional ops are left: they never happen
    if (!events[e].is_return) {
      const int op = events[e].op;
      if (std::optional<int> after = Step(state, ops[op], initial)) {
        flip(op);
        if (remember(*after)) {
          if (pool.size() > kMaxCacheWords) return SearchResult::kOutOfMemory;
          stack.push_back({e, state});
          state = *after;
          unlink(e);
          if (match[e] >= 0) unlink(match[e]);
          e = next[head];
          continue;
        }
        flip(op);
      }
      e = next[e];
    } else {
      // An op returned before any order of the pending ones worked: backtrack.
      if (stack.empty()) return SearchResult::kNo;
      Frame f = stack.back();
      stack.pop_back();
      state = f.state_before;
      flip(events[f.call].op);
      if (match[f.call] >= 0) relink(match[f.call]);
      relink(f.call);
      e = next[f.call];
    }
  }
  return SearchResult::kYes;
}

// One key's ops, interned and pruned.
struct KeyHistory {
  std::string key;
  std::vector<KeyOp> ops;                    // sorted by start, end, index
  std::vector<std::size_t> all;              // every op of the key in the caller's indices
  std::vector<std::int64_t> first_write_at;  // per value: the earliest start of an op writing it
  int values = 1;
};

bool Writes(const KeyOp& op) { return op.kind != Kind::kRead; }

KeyHistory Prepare(const std::string& key, const std::vector<RegisterOp>& all,
                   const std::vector<std::size_t>& indices) {
  KeyHistory h;
  h.key = key;
  h.all = indices;
  std::unordered_map<std::string, int> ids;
  auto intern = [&](const std::optional<std::string>& v) {
    if (!v.has_value()) return kAbsent;
    auto [it, added] = ids.emplace(*v, h.values);
    if (added) ++h.values;
    return it->second;
  };
  std::vector<KeyOp> kept;
  for (std::size_t i : indices) {
    const RegisterOp& r = all[i];
    // A failed op took no effect; an unknown read constrains nothing.
    if (r.outcome == Outcome::kFail) continue;
    if (r.outcome == Outcome::kUnknown && r.kind == Kind::kRead) continue;
    KeyOp op;
    op.index = i;
    op.kind = r.kind;
    op.value = intern(r.value);
    if (r.kind == Kind::kCas) op.from = intern(r.from);
    op.start = r.start_us;
    op.optional = r.outcome == Outcome::kUnknown;
    op.end = op.optional ? kNever : r.end_us;
    kept.push_back(op);
  }
  // An unknown write or cas of a value nothing observes (no read of it, no cas from it) can be
  // left out: in any linearization with it, nothing between it and the next write sees the state,
  // so the linearization without it is one too. This keeps the pending ops that the search
  // tries again and again few.
  std::vector<char> observed(h.values, 0);
  for (const KeyOp& op : kept) {
    if (op.kind == Kind::kRead) observed[op.value] = 1;
    if (op.kind == Kind::kCas) observed[op.from] = 1;
  }
  for (const KeyOp& op : kept) {
    if (op.optional && observed[op.value] == 0) continue;
    h.ops.push_back(op);
  }
  std::sort(h.ops.begin(), h.ops.end(), [](const KeyOp& a, const KeyOp& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end < b.end;
    return a.index < b.index;
  });
  h.first_write_at.assign(h.values, kNever);
  for (const KeyOp& op : h.ops) {
    if (Writes(op)) h.first_write_at[op.value] = std::min(h.first_write_at[op.value], op.start);
  }
  return h;
}

struct Window {
  std::vector<std::size_t> ops;     // the window's, in the caller's indices, by start
  std::vector<std::size_t> extras;  // the concurrent writes it was checked with
};

// The smallest window of consecutive ops (by start) that cannot be ordered, searched by growing
// size. A window W starting at T0 (its first start) and ending at T1 (the last end of its ops
// that are not optional) is checked with a relaxation of the full history:
//  - the state just before T0 may be absent or any value written by an op that started before
//    T0 (kAny over those values);
//  - every other write or cas whose interval meets [T0, T1] is added as optional.
// It is sound: take a linearization of the full history with each op at an instant in its
// interval. The state just before T0 is absent or written by an op taking effect before T0,
// which started before T0. From T0 on, W's ops that must take effect do so within [T0, T1], and
// the only ops that change the state in between are writes and cas taking effect within
// [T0, T1], so meeting it: all in W or among the optional extras (reads outside W change
// nothing; optional ops taking effect before T0 or after T1, in W or not, are left out, which an
// optional op may be, and which nothing in the window observes). So that order
// restricted to W and the extras, from that initial state, is a linearization of the relaxed
// window; when no relaxed window linearizes, the full history does not either. The window of all
// ops from the first has no extras and only absent before it: it is the full check itself.
std::optional<Window> SmallestWindow(const KeyHistory& h, Budget& budget, bool* out_of_time) {
  const std::size_t n = h.ops.size();
  std::vector<KeyOp> sub;
  for (std::size_t size = 1; size <= n; ++size) {
    // The writes before the window that are still running at its start, kept as i advances.
    std::vector<std::size_t> running;
    for (std::size_t i = 0; i + size <= n; ++i) {
      if (budget.ExpiredNow()) {
        *out_of_time = true;
        return std::nullopt;
      }
      const std::int64_t t0 = h.ops[i].start;
      if (i > 0 && Writes(h.ops[i - 1])) running.push_back(i - 1);
      std::erase_if(running, [&](std::size_t j) { return h.ops[j].end < t0; });
      std::int64_t t1 = t0;
      for (std::size_t j = i; j < i + size; ++j) {
        if (!h.ops[j].optional) t1 = std::max(t1, h.ops[j].end);
      }

      Window w;
      sub.assign(h.ops.begin() + static_cast<std::ptrdiff_t>(i),
                 h.ops.begin() + static_cast<std::ptrdiff_t>(i + size));
      for (const KeyOp& op : sub) w.ops.push_back(op.index);
      auto add_extra = [&](const KeyOp& op) {
        KeyOp extra = op;
        extra.optional = true;
        extra.end = kNever;
        sub.push_back(extra);
        w.extras.push_back(op.index);
      };
      for (std::size_t j : running) add_extra(h.ops[j]);
      for (std::size_t j = i + size; j < n && h.ops[j].start <= t1; ++j) {
        if (Writes(h.ops[j])) add_extra(h.ops[j]);
      }
      switch (Linearize(sub, kAny, {&h.first_write_at, t0}, budget)) {
        case SearchResult::kYes:
          break;
        case SearchResult::kNo:
          return w;
        case SearchResult::kOutOfTime:
        case SearchResult::kOutOfMemory:
          *out_of_time = true;
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

std::string Quoted(const std::string& key) {
  std::string out = "\"";
  for (std::size_t i = 0; i < key.size() && i < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  return out + (key.size() > 80 ? "...\"" : "\"");
}

void AppendOps(const std::vector<RegisterOp>& all, std::vector<std::size_t> indices,
               std::int64_t origin, std::string_view file, std::size_t limit, std::string* out) {
  std::stable_sort(indices.begin(), indices.end(),
                   [&](std::size_t a, std::size_t b) { return all[a].start_us < all[b].start_us; });
  for (std::size_t i = 0; i < indices.size() && i < limit; ++i) {
    *out += "\n  " + Describe(all[indices[i]], origin, file);
  }
  if (indices.size() > limit) {
    *out += "\n  ... and " + std::to_string(indices.size() - limit) + " more";
  }
}

}  // namespace

LinearizabilityReport CheckLinearizable(const std::vector<RegisterOp>& ops,
                                        std::chrono::steady_clock::time_point deadline,
                                        Clock* clock, std::int64_t origin_us,
                                        std::string_view file) {
  Budget budget(clock != nullptr ? clock : Clock::Real(), deadline);
  std::map<std::string, std::vector<std::size_t>> by_key;  // keys in name order: a stable report
  for (std::size_t i = 0; i < ops.size(); ++i) by_key[ops[i].key].push_back(i);

  LinearizabilityReport undecided;
  bool any_undecided = false;
  for (const auto& [key, indices] : by_key) {
    KeyHistory h = Prepare(key, ops, indices);
    std::int64_t origin = origin_us;
    if (origin == 0) {
      origin = ops[indices.front()].start_us;
      for (std::size_t i : indices) origin = std::min(origin, ops[i].start_us);
    }
    const std::string times = origin_us != 0 ? " (times in s since the start)"
                                             : " (times in s since the key's first operation)";

    SearchResult full = Linearize(h.ops, kAbsent, {}, budget);
    if (full == SearchResult::kYes) continue;
    if (full != SearchResult::kNo) {
      if (!any_undecided) {
        any_undecided = true;
        undecided.verdict = LinearizabilityReport::Verdict::kUndecided;
        undecided.key = key;
        undecided.window = h.all;
        undecided.message =
            "key " + Quoted(key) + ": undecided, the search " +
            (full == SearchResult::kOutOfTime ? "ran out of time" : "reached its memory bound") +
            " over its " + Plural(static_cast<long long>(h.ops.size()), "operation") + times + ":";
        AppendOps(ops, h.all, origin, file, 20, &undecided.message);
      }
      continue;
    }

    LinearizabilityReport report;
    report.verdict = LinearizabilityReport::Verdict::kNotLinearizable;
    report.key = key;
    bool out_of_time = false;
    std::optional<Window> w = SmallestWindow(h, budget, &out_of_time);
    if (w.has_value()) {
      report.window = w->ops;
      std::sort(report.window.begin(), report.window.end(), [&](std::size_t a, std::size_t b) {
        return ops[a].start_us != ops[b].start_us ? ops[a].start_us < ops[b].start_us : a < b;
      });
      const bool one = w->ops.size() == 1;
      report.message = "key " + Quoted(key) + " is not linearizable: " +
                       (one ? std::string("this operation cannot be ordered")
                            : "these " + std::to_string(w->ops.size()) +
                                  " operations cannot be ordered") +
                       times + ":";
      AppendOps(ops, w->ops, origin, file, 50, &report.message);
      report.message += one ? "\nNo moment within its interval, starting from absent or from any "
                              "value written before it"
                            : "\nNo order of them, each taking effect within its interval, "
                              "starting from absent or from any value written before them";
      if (!w->extras.empty()) {
        report.message += w->extras.size() == 1
                              ? std::string(", with or without the write concurrent with ") +
                                    (one ? "it," : "them,")
                              : ", with or without the " + std::to_string(w->extras.size()) +
                                    " writes concurrent with " + (one ? "it," : "them,");
      }
      if (w->extras.empty()) report.message += ",";
      report.message += " is what one register would do.";
      if (!w->extras.empty()) {
        report.message += "\nThe concurrent writes:";
        AppendOps(ops, w->extras, origin, file, 10, &report.message);
      }
    } else {
      report.window = h.all;
      report.message = "key " + Quoted(key) + " is not linearizable: no order of its " +
                       Plural(static_cast<long long>(h.ops.size()), "operation") +
                       " is what one register would do (the search for the smallest "
                       "window that cannot be ordered " +
                       (out_of_time ? "ran out of time" : "found none") + ")" + times + ":";
      AppendOps(ops, h.all, origin, file, 20, &report.message);
    }
    return report;
  }
  if (any_undecided) return undecided;
  return {};
}

}  // namespace fencekit::pausetest
