// The linearizability check (cas-register) of the pause-test kit against hand-made, simulated
// and random histories, beside a brute-force search.
#include "fencekit/pausetest/linearizability.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/pausetest/register_history.h"
#include "support/test_support.h"

namespace fencekit::pausetest {
namespace {

using namespace std::chrono_literals;
using Kind = RegisterOp::Kind;
using Outcome = RegisterOp::Outcome;
using Verdict = LinearizabilityReport::Verdict;

std::optional<std::string> V(int v) { return std::to_string(v); }
constexpr std::nullopt_t kAbsent = std::nullopt;

RegisterOp Read(int client, std::optional<std::string> value, std::int64_t start, std::int64_t end,
                Outcome outcome = Outcome::kOk, std::string key = "x") {
  RegisterOp op;
  op.client = client;
  op.kind = Kind::kRead;
  op.key = std::move(key);
  op.value = std::move(value);
  op.start_us = start;
  op.end_us = end;
  op.outcome = outcome;
  return op;
}

RegisterOp Write(int client, std::optional<std::string> value, std::int64_t start, std::int64_t end,
                 Outcome outcome = Outcome::kOk, std::string key = "x") {
  RegisterOp op = Read(client, std::move(value), start, end, outcome, std::move(key));
  op.kind = Kind::kWrite;
  return op;
}

RegisterOp Cas(int client, std::optional<std::string> from, std::optional<std::string> value,
               std::int64_t start, std::int64_t end, Outcome outcome = Outcome::kOk,
               std::string key = "x") {
  RegisterOp op = Read(client, std::move(value), start, end, outcome, std::move(key));
  op.kind = Kind::kCas;
  op.from = std::move(from);
  return op;
}

LinearizabilityReport Check(const std::vector<RegisterOp>& ops,
                            std::chrono::steady_clock::duration bound = 10s) {
  return CheckLinearizable(ops, std::chrono::steady_clock::now() + bound);
}

TEST(LinearizabilityTest, AnEmptyHistoryIsLinearizable) { EXPECT_TRUE(Check({}).ok()); }

TEST(LinearizabilityTest, ASequentialHistoryIsLinearizable) {
  auto r = Check({Read(1, kAbsent, 0, 1), Write(1, V(1), 2, 3), Read(2, V(1), 4, 5),
                  Cas(2, V(1), V(2), 6, 7), Cas(1, kAbsent, V(9), 8, 9, Outcome::kFail),
                  Read(1, V(2), 10, 11), Write(2, kAbsent, 12, 13), Cas(1, kAbsent, V(3), 14, 15),
                  Read(2, V(3), 16, 17)});
  EXPECT_EQ(r.verdict, Verdict::kLinearizable) << r.message;
}

TEST(LinearizabilityTest, NumbersAndStringsAreEqualAsText) {
  auto r = Check({Write(1, "5", 0, 1), Read(2, V(5), 2, 3), Cas(1, "5", V(6), 4, 5)});
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST(LinearizabilityTest, AReadOverlappingAWriteMaySeeEitherValue) {
  for (int seen : {1, 2}) {
    auto r = Check({Write(1, V(1), 0, 10), Write(1, V(2), 20, 40), Read(2, V(seen), 25, 30),
                    Read(3, V(2), 41, 42)});
    EXPECT_TRUE(r.ok()) << seen << ": " << r.message;
  }
  // Ops that touch at an instant may take effect in either order.
  EXPECT_TRUE(Check({Write(1, V(1), 0, 10), Read(2, V(1), 10, 10)}).ok());
}

TEST(LinearizabilityTest, AReadOfAValueNeverWrittenIsNot) {
  std::vector<RegisterOp> ops = {Write(1, V(1), 0, 10), Read(2, V(1), 11, 12),
                                 Read(2, V(7), 13, 14), Write(1, V(3), 15, 16)};
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.key, "x");
  EXPECT_EQ(r.window, std::vector<std::size_t>{2});
  EXPECT_NE(r.message.find(Describe(ops[2], 0)), std::string::npos) << r.message;
}

TEST(LinearizabilityTest, AStaleReadAfterACompletedWriteIsNot) {
  std::vector<RegisterOp> ops = {Write(1, V(1), 0, 10'000), Write(2, V(2), 20'000, 30'000),
                                 Read(3, V(1), 40'000, 50'000)};
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.window, (std::vector<std::size_t>{1, 2})) << r.message;
  EXPECT_NE(r.message.find("client 2 write x 2 (ok) 0.020-0.030 s"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("client 3 read x -> 1 (ok) 0.040-0.050 s"), std::string::npos)
      << r.message;
}

TEST(LinearizabilityTest, TwoCasFromTheSameValueBothOkIsALostUpdate) {
  std::vector<RegisterOp> ops = {Write(1, V(5), 0, 10), Cas(2, V(5), V(6), 20, 40),
                                 Cas(3, V(5), V(6), 30, 50)};
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.window, (std::vector<std::size_t>{1, 2})) << r.message;
  // One of them failing is what a register does.
  ops[2].outcome = Outcome::kFail;
  EXPECT_TRUE(Check(ops).ok());
}

TEST(LinearizabilityTest, TheMessagesTimesAreSinceTheGivenOrigin) {
  std::vector<RegisterOp> ops = {Write(1, V(5), 2'000'000, 2'000'010),
                                 Cas(2, V(5), V(6), 2'500'000, 2'600'000),
                                 Cas(3, V(5), V(6), 2'550'000, 2'650'000)};
  auto r = CheckLinearizable(ops, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                             nullptr, 1'000'000);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_NE(r.message.find("since the start"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("1.500-1.600 s"), std::string::npos) << r.message;
}

TEST(LinearizabilityTest, AnUnknownWriteMayHaveHappenedToExplainALaterRead) {
  // The write timed out; the read, long after, sees its value.
  auto r = Check({Write(1, V(1), 0, 10), Write(2, V(2), 20, 30, Outcome::kUnknown),
                  Read(1, V(1), 40, 50), Read(3, V(2), 1000, 1010)});
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST(LinearizabilityTest, AnUnknownWriteMayNeverHaveHappened) {
  auto r = Check({Write(1, V(1), 0, 10), Write(2, V(2), 20, 30, Outcome::kUnknown),
                  Read(1, V(1), 40, 50), Cas(2, V(3), V(4), 60, 70, Outcome::kUnknown),
                  Read(3, V(1), 1000, 1010)});
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST(LinearizabilityTest, AnUnknownWriteOfAValueReadElsewhereMayNeverHaveHappened) {
  // 2 is read (before the unknown write), so the search itself must leave the write out.
  auto r = Check({Write(1, V(2), 0, 10), Read(2, V(2), 11, 12), Write(1, V(1), 13, 14),
                  Write(2, V(2), 15, 16, Outcome::kUnknown), Read(3, V(1), 100, 110),
                  Cas(3, V(1), V(3), 120, 130)});
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST(LinearizabilityTest, AnUnknownWriteCannotTakeEffectBeforeItStarted) {
  auto r = Check({Read(1, V(2), 0, 10), Write(2, V(2), 20, 30, Outcome::kUnknown)});
  EXPECT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
}

TEST(LinearizabilityTest, FailedOpsAndUnknownReadsAreLeftOut) {
  auto r = Check({Write(1, V(1), 0, 10), Write(2, V(9), 20, 30, Outcome::kFail),
                  Cas(3, V(1), V(8), 20, 30, Outcome::kFail),
                  Read(1, V(7), 40, 50, Outcome::kUnknown), Read(1, V(1), 60, 70)});
  EXPECT_TRUE(r.ok()) << r.message;
}

TEST(LinearizabilityTest, KeysAreCheckedIndependently) {
  std::vector<RegisterOp> ops = {
      Write(1, V(1), 0, 10, Outcome::kOk, "a"),  Write(1, V(1), 0, 10, Outcome::kOk, "b"),
      Write(2, V(2), 20, 30, Outcome::kOk, "b"), Read(2, V(2), 40, 50, Outcome::kOk, "a"),
      Read(3, V(2), 40, 50, Outcome::kOk, "b"),  Read(3, V(1), 60, 70, Outcome::kOk, "c"),
  };
  // "a" reads 2, written only to "b"; "c" reads 1 that only "a" and "b" had.
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.key, "a");
  EXPECT_EQ(r.window, std::vector<std::size_t>{3});
  EXPECT_EQ(r.message.find("\"b\""), std::string::npos) << r.message;
  ops[3].value = V(1);
  r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.key, "c");
  ops.pop_back();
  EXPECT_TRUE(Check(ops).ok());
}

TEST(LinearizabilityTest, TheReportedWindowIsTheViolationNotTheHistory) {
  // 1000 increments by cas from three clients, one after another; in the middle two of them
  // both succeed from 500.
  std::vector<RegisterOp> ops = {Write(0, V(0), 0, 5)};
  for (int i = 0; i < 999; ++i) {
    ops.push_back(Cas(i % 3, V(i), V(i + 1), 10 * (i + 1), 10 * (i + 1) + 5));
  }
  ASSERT_TRUE(Check(ops).ok());
  // ops[501] is cas 500 -> 501 at 5010-5015; a second one overlaps it, and the next cas starts
  // from 501 as both wrote.
  ops.push_back(Cas(7, V(500), V(501), 5012, 5018));
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.window, (std::vector<std::size_t>{501, 1000})) << r.message;

  // And a stale read in the middle of a good history.
  ops.pop_back();
  ops.push_back(Read(8, V(300), 5020, 5021));
  r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_LE(r.window.size(), 3u) << r.message;
  EXPECT_NE(std::find(r.window.begin(), r.window.end(), 1000u), r.window.end()) << r.message;
}

// A seeded simulation of a real register: `clients` clients each do one op at a time, which
// takes effect at a random instant within its interval; reads see what it holds then, cas from
// a value read earlier succeeds only when it still holds, and some writes and cas time out
// (outcome unknown) having taken effect or not.
std::vector<RegisterOp> SimulatedHistory(std::uint64_t seed, int clients, int count,
                                         const std::vector<std::string>& keys,
                                         int unknown_per_mille = 5) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  struct Planned {
    RegisterOp op;
    std::int64_t at;
    bool takes_effect_if_unknown;
  };
  std::vector<Planned> planned;
  std::vector<std::int64_t> cursor(clients, 1'764'140'000'000'000);
  for (int n = 0; n < count; ++n) {
    int c = static_cast<int>(std::min_element(cursor.begin(), cursor.end()) - cursor.begin());
    Planned p;
    p.op.client = c;
    p.op.key = keys[uniform(keys.size())];
    p.op.start_us = cursor[c] + uniform(30);
    p.op.end_us = p.op.start_us + 1 + uniform(300);
    p.at = p.op.start_us + uniform(p.op.end_us - p.op.start_us + 1);
    std::int64_t dice = uniform(100);
    p.op.kind = dice < 40 ? Kind::kRead : dice < 60 ? Kind::kWrite : Kind::kCas;
    if (p.op.kind != Kind::kRead && uniform(1000) < unknown_per_mille)
      p.op.outcome = Outcome::kUnknown;
    p.takes_effect_if_unknown = uniform(2) == 0;
    cursor[c] = p.op.end_us;
    planned.push_back(std::move(p));
  }
  std::stable_sort(planned.begin(), planned.end(),
                   [](const Planned& a, const Planned& b) { return a.at < b.at; });
  std::map<std::string, std::optional<std::string>> state;
  std::vector<RegisterOp> ops;
  int written = 0;
  for (Planned& p : planned) {
    RegisterOp& op = p.op;
    std::optional<std::string>& s = state[op.key];
    bool effect = op.outcome == Outcome::kOk || p.takes_effect_if_unknown;
    switch (op.kind) {
      case Kind::kRead:
        op.value = s;
        break;
      case Kind::kWrite:
        op.value = "w" + std::to_string(++written);
        if (effect) s = op.value;
        break;
      case Kind::kCas:
        // Mostly from the current value (a fresh read), sometimes from a stale guess.
        op.from = uniform(4) != 0 ? s : V(static_cast<int>(uniform(3)));
        op.value = "c" + std::to_string(++written);
        if (op.from == s) {
          if (effect) s = op.value;
        } else if (op.outcome == Outcome::kOk) {
          op.outcome = Outcome::kFail;
        }
        break;
    }
    ops.push_back(std::move(op));
  }
  // The order the workers appended them in: by end.
  std::stable_sort(ops.begin(), ops.end(),
                   [](const RegisterOp& a, const RegisterOp& b) { return a.end_us < b.end_us; });
  return ops;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(LinearizabilityTest, ALargeConcurrentHistoryIsDecidedWithinItsBound) {
  for (std::uint64_t seed : {1u, 2u}) {
    std::vector<RegisterOp> ops = SimulatedHistory(seed, 5, 10'000, {"counter"});
    // It is the history meant: concurrent, with unknown outcomes.
    std::vector<RegisterOp> by_start = ops;
    std::sort(by_start.begin(), by_start.end(),
              [](const RegisterOp& a, const RegisterOp& b) { return a.start_us < b.start_us; });
    int overlapping = 0;
    for (std::size_t i = 1; i < by_start.size(); ++i) {
      overlapping += by_start[i].start_us <= by_start[i - 1].end_us ? 1 : 0;
    }
    EXPECT_GT(overlapping, 5'000);
    EXPECT_GT(std::count_if(ops.begin(), ops.end(),
                            [](const RegisterOp& op) { return op.outcome == Outcome::kUnknown; }),
              10);

    auto start = std::chrono::steady_clock::now();
    auto r = Check(ops, 5s);
    double took = SecondsSince(start);
    EXPECT_EQ(r.verdict, Verdict::kLinearizable) << "seed " << seed << ": " << r.message;
    std::printf("seed %d: 10000 ops on one key checked in %.3f s\n", static_cast<int>(seed), took);
  }
}

TEST(LinearizabilityTest, ALostUpdateInALargeHistoryIsFoundWithItsSmallWindow) {
  std::vector<RegisterOp> ops = SimulatedHistory(4, 5, 10'000, {"counter"});
  // A second ok cas from the same value as one in the middle, at the same time: values are
  // written once each, so both cannot have succeeded.
  std::size_t middle = ops.size() / 2;
  while (ops[middle].kind != Kind::kCas || ops[middle].outcome != Outcome::kOk ||
         !ops[middle].from.has_value()) {
    ++middle;
  }
  RegisterOp twin = ops[middle];
  twin.client = 9;
  ops.push_back(twin);
  auto start = std::chrono::steady_clock::now();
  // What is checked is the window, not the time (printed below): the budget leaves room for a
  // sanitizer build on a slow machine, where the search took over 5 s.
  auto r = Check(ops, 30s);
  double took = SecondsSince(start);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_LE(r.window.size(), 3u) << r.message;
  EXPECT_NE(std::find(r.window.begin(), r.window.end(), middle), r.window.end()) << r.message;
  EXPECT_NE(std::find(r.window.begin(), r.window.end(), ops.size() - 1), r.window.end())
      << r.message;
  std::printf("10001 ops with a lost update: window of %d found in %.3f s\n",
              static_cast<int>(r.window.size()), took);
}

TEST(LinearizabilityTest, ASimulatedHistoryWithOneStaleReadIsNot) {
  std::vector<RegisterOp> ops = SimulatedHistory(3, 5, 2'000, {"a", "b", "c"});
  ASSERT_TRUE(Check(ops).ok());
  // A read long after everything that sees the first value written to "b".
  const RegisterOp* first = nullptr;
  for (const RegisterOp& op : ops) {
    if (op.key == "b" && op.kind == Kind::kWrite && op.outcome == Outcome::kOk &&
        (first == nullptr || op.start_us < first->start_us)) {
      first = &op;
    }
  }
  ASSERT_NE(first, nullptr);
  std::int64_t last = 0;
  for (const RegisterOp& op : ops) last = std::max(last, op.end_us);
  ops.push_back(Read(9, first->value, last + 1000, last + 2000, Outcome::kOk, "b"));
  auto r = Check(ops);
  ASSERT_EQ(r.verdict, Verdict::kNotLinearizable) << r.message;
  EXPECT_EQ(r.key, "b");
  EXPECT_LE(r.window.size(), 3u) << r.message;
  EXPECT_EQ(r.window.back(), ops.size() - 1) << r.message;
}

// The definition, by brute force: some order of the ops that must take effect and any of the
// optional ones, in which an op that ended before another started comes first, is what a
// register does.
bool LinearizableByBruteForce(const std::vector<RegisterOp>& all) {
  std::vector<RegisterOp> ops;
  for (const RegisterOp& op : all) {
    if (op.outcome == Outcome::kFail) continue;
    if (op.outcome == Outcome::kUnknown && op.kind == Kind::kRead) continue;
    ops.push_back(op);
  }
  std::vector<char> placed(ops.size(), 0);
  std::function<bool(const std::optional<std::string>&)> search =
      [&](const std::optional<std::string>& state) {
        bool done = true;
        for (std::size_t i = 0; i < ops.size(); ++i) {
          if (placed[i] == 0 && ops[i].outcome == Outcome::kOk) done = false;
        }
        if (done) return true;
        for (std::size_t c = 0; c < ops.size(); ++c) {
          if (placed[c] != 0) continue;
          bool ready = true;
          for (std::size_t r = 0; r < ops.size(); ++r) {
            if (placed[r] == 0 && r != c && ops[r].outcome == Outcome::kOk &&
                ops[r].end_us < ops[c].start_us) {
              ready = false;
            }
          }
          if (!ready) continue;
          const RegisterOp& op = ops[c];
          std::optional<std::string> after = state;
          if (op.kind == Kind::kRead && op.value != state) continue;
          if (op.kind == Kind::kCas && op.from != state) continue;
          if (op.kind != Kind::kRead) after = op.value;
          placed[c] = 1;
          bool found = search(after);
          placed[c] = 0;
          if (found) return true;
        }
        return false;
      };
  return search(std::nullopt);
}

TEST(LinearizabilityTest, AgreesWithBruteForceOnSmallRandomHistories) {
  std::mt19937_64 rng(31);
  auto uniform = [&](std::uint64_t n) { return static_cast<int>(rng() % n); };
  auto value = [&]() -> std::optional<std::string> {
    int v = uniform(3);
    return v == 0 ? std::nullopt : V(v);
  };
  int not_linearizable = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<RegisterOp> ops;
    int n = 1 + uniform(7);
    for (int i = 0; i < n; ++i) {
      std::int64_t start = uniform(20);
      std::int64_t end = start + uniform(8);
      int kind = uniform(3);
      int outcome = uniform(10);
      Outcome o = outcome < 7 ? Outcome::kOk : outcome < 9 ? Outcome::kUnknown : Outcome::kFail;
      if (kind == 0) ops.push_back(Read(i, value(), start, end, o));
      if (kind == 1) ops.push_back(Write(i, value(), start, end, o));
      if (kind == 2) ops.push_back(Cas(i, value(), value(), start, end, o));
    }
    bool expected = LinearizableByBruteForce(ops);
    auto r = Check(ops);
    ASSERT_NE(r.verdict, Verdict::kUndecided) << r.message;
    std::string shown;
    for (const RegisterOp& op : ops) shown += Describe(op) + "\n";
    ASSERT_EQ(r.ok(), expected) << "round " << round << ":\n" << shown << r.message;
    if (!r.ok()) {
      ++not_linearizable;
      ASSERT_FALSE(r.window.empty()) << r.message;
      for (std::size_t i : r.window) ASSERT_LT(i, ops.size());
    }
  }
  EXPECT_GT(not_linearizable, 300);
}

// 40 concurrent writes of distinct values, then a read of a value none wrote: every order of
// the writes is a state to explore.
std::vector<RegisterOp> PathologicalHistory() {
  std::vector<RegisterOp> ops;
  for (int i = 0; i < 40; ++i) ops.push_back(Write(i, V(i), i, 1000));
  for (int i = 0; i < 40; ++i) ops.push_back(Read(i, V(i), 500 + i, 1000 + i));
  ops.push_back(Read(99, V(-1), 2000, 2001));
  return ops;
}

TEST(LinearizabilityTest, APathologicalHistoryPastItsDeadlineIsUndecided) {
  auto start = std::chrono::steady_clock::now();
  auto r = Check(PathologicalHistory(), 50ms);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.verdict, Verdict::kUndecided) << r.message;
  EXPECT_EQ(r.key, "x");
  EXPECT_NE(r.message.find("ran out of time"), std::string::npos) << r.message;
  EXPECT_LT(took, 2s);
}

TEST(LinearizabilityTest, TheDeadlineIsReadFromTheGivenClock) {
  FakeClock clock;
  auto r = CheckLinearizable(PathologicalHistory(), clock.Now() - 1s, &clock);
  EXPECT_EQ(r.verdict, Verdict::kUndecided) << r.message;
}

}  // namespace
}  // namespace fencekit::pausetest
