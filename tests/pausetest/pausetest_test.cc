// The pause-test kit's parts: the checker against hand-made bad histories it must catch, the
// history file format, the seeded schedule, the pauser on a real process, and the runner as a
// user's own GoogleTest suite would call it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <limits>

#include "fencekit/pausetest/checker.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/pausetest/pauser.h"
#include "fencekit/pausetest/runner.h"
#include "fencekit/procutil/proc_stat.h"
#include "support/test_support.h"

namespace fencekit::pausetest {
namespace {

using namespace std::chrono_literals;

HistoryOp Op(int client, std::string op, std::int64_t token, std::string key, std::int64_t value,
             std::string outcome = "ok") {
  HistoryOp o;
  o.client = client;
  o.op = std::move(op);
  o.lock = "L";
  o.token = token;
  o.key = std::move(key);
  o.value = value;
  o.outcome = std::move(outcome);
  return o;
}

Decision Accepted(std::int64_t seq, std::int64_t token, std::string key, bool accepted = true) {
  Decision d;
  d.seq = seq;
  d.op = "put";
  d.lock = "L";
  d.token = token;
  d.key = std::move(key);
  d.accepted = accepted;
  return d;
}

// Two clients, one after the other, each: claim, read, write + 1.
CheckInput GoodRun() {
  CheckInput in;
  in.history = {Op(0, "claim", 1, "claim", 0), Op(0, "read", 1, "c", 0), Op(0, "write", 1, "c", 1),
                Op(1, "claim", 2, "claim", 1), Op(1, "read", 2, "c", 1), Op(1, "write", 2, "c", 2)};
  in.store_log = {Accepted(1, 1, "claim"), Accepted(2, 1, "c"), Accepted(3, 2, "claim"),
                  Accepted(4, 2, "c")};
  in.final_counters["c"] = 2;
  return in;
}

TEST(CheckerTest, AcceptsAHistoryWithoutViolations) {
  CheckReport r = CheckHistory(GoodRun());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.acknowledged_writes, 4);
  EXPECT_TRUE(r.violations.empty());
}

TEST(CheckerTest, CatchesAnOlderTokenAcceptedAfterANewerOneInCommitOrder) {
  CheckInput in = GoodRun();
  in.store_log.push_back(Accepted(5, 1, "c"));  // the paused holder's late write got in
  in.store_log.push_back(Accepted(6, 1, "c", /*accepted=*/false));  // refused: not counted
  CheckReport r = CheckHistory(in);
  EXPECT_EQ(r.stale_accepted, 1);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations[0].find("accepted token 1"), std::string::npos) << r.violations[0];
}

TEST(CheckerTest, UsesTheStoresCommitOrderNotTheOrderGiven) {
  CheckInput in = GoodRun();
  std::swap(in.store_log[1], in.store_log[3]);  // same seqs, listed out of order
  EXPECT_EQ(CheckHistory(in).stale_accepted, 0);
}

TEST(CheckerTest, CatchesAnAcknowledgedWriteMissingFromTheStore) {
  CheckInput in = GoodRun();
  in.store_log.pop_back();  // the store lost client 1's acknowledged write
  in.final_counters["c"] = 1;
  CheckReport r = CheckHistory(in);
  EXPECT_EQ(r.missing_acknowledged, 1);
  EXPECT_FALSE(r.ok());
}

TEST(CheckerTest, CatchesLostUpdates) {
  CheckInput in;
  // Both read 0 and wrote 1: two acknowledged increments, a counter of 1.
  in.history = {Op(0, "read", 1, "c", 0), Op(1, "read", 2, "c", 0), Op(1, "write", 2, "c", 1),
                Op(0, "write", 1, "c", 1)};
  in.store_log = {Accepted(1, 2, "c"), Accepted(2, 1, "c")};
  in.final_counters["c"] = 1;
  CheckReport r = CheckHistory(in);
  EXPECT_EQ(r.lost_updates, 1);
  EXPECT_EQ(r.stale_accepted, 1);
}

TEST(CheckerTest, CountsAnIndeterminateWriteThatLandedAsAnIncrement) {
  CheckInput in = GoodRun();
  // Client 1's write got no answer (the store was killed) but it committed.
  in.history.back().outcome = "error";
  EXPECT_TRUE(CheckHistory(in).ok());
  in.final_counters["c"] = 1;  // ... yet the counter did not move: an increment was lost
  EXPECT_EQ(CheckHistory(in).lost_updates, 1);
}

// A report is ok exactly when it lists no violation (found by fuzzing the checker: a counter
// below 0 with no accepted increment was listed as "0 lost").
TEST(CheckerTest, ANegativeCounterWithoutIncrementsIsNoViolation) {
  CheckInput in;
  in.history = {Op(0, "write", 1, "c", 1, "error"), Op(0, "read", 1, "c", 0)};
  in.final_counters["c"] = std::numeric_limits<std::int64_t>::min();
  CheckReport r = CheckHistory(in);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  in.store_log = {Accepted(1, 1, "c")};  // the write landed: one increment, all of it lost
  r = CheckHistory(in);
  EXPECT_EQ(r.lost_updates, 1);
  EXPECT_EQ(r.violations.size(), 1u);
}

TEST(CheckerTest, CountsEachExpiredLeaseOnce) {
  CheckInput in = GoodRun();
  in.history[1].lease_expired = true;
  in.history[2].lease_expired = true;  // same client and token: one lease
  HistoryOp release = Op(1, "release", 2, "", 0, "not_held");
  in.history.push_back(release);
  EXPECT_EQ(CheckHistory(in).expired_leases, 2);
}

TEST(HistoryTest, RoundTripsThroughJsonLines) {
  HistoryOp op = Op(3, "write", 42, "k\"ey\n", 7, "stale");
  op.start_us = 100;
  op.end_us = 250;
  op.lease_expired = true;
  op.detail = "refused";
  auto back = FromJsonLine(ToJsonLine(op));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->client, 3);
  EXPECT_EQ(back->key, "k\"ey\n");
  EXPECT_EQ(back->token, 42);
  EXPECT_EQ(back->end_us, 250);
  EXPECT_TRUE(back->lease_expired);
  EXPECT_EQ(back->detail, "refused");
}

TEST(HistoryTest, ReadingNamesTheFirstMalformedLine) {
  testing::TempDir dir;
  std::string path = dir.path() + "/h.jsonl";
  std::ofstream(path) << ToJsonLine(Op(0, "read", 1, "c", 0)) << "\n{\"client\":1}\n";
  auto h = ReadHistory(path);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(h.status().IsInvalidArgument());
  EXPECT_NE(h.status().message().find("line 2"), std::string::npos) << h.status().ToString();
}

TEST(HistoryTest, LinesAppendedBySeveralProcessesDoNotTear) {
  testing::TempDir dir;
  std::string path = dir.path() + "/h.jsonl";
  constexpr int kProcesses = 4, kEach = 300;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    if (pid == 0) {
      auto w = HistoryWriter::Open(path);
      HistoryOp op = Op(p, "write", 1, std::string(300, 'k'), 0);
      for (int i = 0; i < kEach && w.ok(); ++i) {
        op.value = i;
        if (!w->Append(op).ok()) _exit(1);
      }
      _exit(w.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto h = ReadHistory(path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->size(), static_cast<std::size_t>(kProcesses * kEach));
}

TEST(PauseScheduleTest, IsReproducibleFromItsSeedAndWithinBounds) {
  auto a = MakePauseSchedule(7, 3, 20, 1000ms, 100ms);
  auto b = MakePauseSchedule(7, 3, 20, 1000ms, 100ms);
  auto c = MakePauseSchedule(8, 3, 20, 1000ms, 100ms);
  ASSERT_EQ(a.size(), 20u);
  bool differs = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at, b[i].at);
    EXPECT_EQ(a[i].target, b[i].target);
    EXPECT_EQ(a[i].length, b[i].length);
    differs |= a[i].at != c[i].at;
    EXPECT_GE(a[i].length, 50ms);
    EXPECT_LE(a[i].length, 300ms);
    EXPECT_LT(a[i].at, 1000ms);
    if (i > 0) {
      EXPECT_GE(a[i].at, a[i - 1].at);
    }
  }
  EXPECT_TRUE(differs);
}

// Waits for the state to change, as the signal is delivered asynchronously.
bool WaitForState(pid_t pid, bool stopped) {
  for (int i = 0; i < 2000; ++i) {
    if ((procutil::ReadProcStat(pid).state == 'T') == stopped) return true;
    usleep(1000);
  }
  return false;
}

TEST(ProcessPauserTest, StopsAndContinuesARealProcessAndResumesAllWhenDestroyed) {
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  {
    ProcessPauser pauser;
    ASSERT_TRUE(pauser.Pause(child));
    EXPECT_TRUE(WaitForState(child, true));
    EXPECT_TRUE(pauser.paused(child));
    ASSERT_TRUE(pauser.Resume(child));
    EXPECT_TRUE(WaitForState(child, false));
    ASSERT_TRUE(pauser.Pause(child));
    EXPECT_TRUE(WaitForState(child, true));
  }
  EXPECT_TRUE(WaitForState(child, false));  // the destructor continued it
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(ProcessPauser().Pause(child));  // gone
}

// What a user's own suite does: a few runs with fencing on.
TEST(RunPauseTestsTest, FromAUsersSuiteFencingKeepsEveryIncrement) {
  PauseTestOptions options;
  options.runs = 3;
  options.fenced_path = testing::FencedBinary();
  auto fenced = RunPauseTests(options);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  EXPECT_EQ(fenced->runs, 3);
  EXPECT_EQ(fenced->stale_accepted, 0);
  EXPECT_EQ(fenced->lost_updates, 0);
  EXPECT_EQ(fenced->missing_acknowledged, 0);
  EXPECT_GT(fenced->acknowledged_writes, 0);
  EXPECT_EQ(fenced->Line().rfind("pause-runs: runs=3 stale_accepted=0 lost_updates=0 ", 0), 0u)
      << fenced->Line();
}

// A run that cannot finish (here its fenced exits at start) stops the runs, and the error says
// where that run's files stay, so that its logs can be read.
TEST(RunPauseTestsTest, ARunThatCannotFinishNamesTheFolderItsFilesStayIn) {
  testing::TempDir tmp;
  const std::string broken = tmp.File("fenced");
  {
    std::ofstream script(broken);
    script << "#!/bin/sh\necho 'cannot start' >&2\nexit 1\n";
  }
  ASSERT_EQ(::chmod(broken.c_str(), 0755), 0);
  PauseTestOptions options;
  options.runs = 2;
  options.fenced_path = broken;
  options.work_dir = tmp.File("runs");
  auto r = RunPauseTests(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("run 0's files: " + tmp.File("runs") + "/run-0"),
            std::string::npos)
      << r.status().ToString();
}

TEST(RunPauseTestsTest, RefusesOptionsThatCannotTestAnything) {
  PauseTestOptions options;
  options.clients = 1;
  auto r = RunPauseTests(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--clients"), std::string::npos);
  options.clients = 3;
  options.fenced_path = "/nonexistent/fenced";
  r = RunPauseTests(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/fenced"), std::string::npos);
  // etcd grants whole seconds: a 150ms ttl would never be outlived by a pause.
  options.fenced_path.clear();
  options.locks_uri = "etcd://127.0.0.1:2379";
  r = RunPauseTests(options);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("whole seconds"), std::string::npos);
  EXPECT_NE(r.status().message().find("--ttl 1s"), std::string::npos);
}

}  // namespace
}  // namespace fencekit::pausetest
