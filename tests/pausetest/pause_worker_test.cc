// fencectl pause-test --worker: the user's own worker under the kit's pauses, with the real
// fencectl binary, its embedded SQLite lock service and shell workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/matching.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::CommandResult;
using testing::FencectlBinary;
using testing::RunCommand;
using testing::ReadWholeFile;
using testing::TempDir;

class PauseWorkerTest : public ::testing::Test {
 protected:
  // fencectl pause-test --worker WORKER ARGS..., files in the test's folder (kept).
  CommandResult PauseTest(const std::string& worker, std::vector<std::string> args) {
    std::vector<std::string> argv = {FencectlBinary(), "pause-test",      "--worker", worker,
                                     "--work-dir",     dir_.File("work"), "--keep"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  static std::string LastLine(const std::string& out) {
    std::string s = out;
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
  }
  std::string Run(int run) const { return dir_.File("work") + "/run-" + std::to_string(run); }
  TempDir dir_;
};

// A register that only a holder writes, as a file: read, pause window, write.
constexpr const char* kFileCounter = R"sh(
f="$FENCEKIT_RUN_DIR/counter"; now() { date +%s%6N; }
start=$(now); v=$(cat "$f" 2>/dev/null); [ -n "$v" ] || v=null
sleep 0.02
n=$(( ${v#null} + 1 )); echo "$n" > "$f"
printf '{"op":"cas","key":"c","from":%s,"value":%s,"start_us":%s,"end_us":%s,"outcome":"ok"}\n' \
  "$v" "$n" "$start" "$(now)" >> "$FENCEKIT_HISTORY"
)sh";

TEST_F(PauseWorkerTest, GivesEachInvocationTheLeaseAndTheRunsVariables) {
  const std::string worker =
      "env | grep -E '^(FENCING_|FENCEKIT_)' | sort > \"$FENCEKIT_RUN_DIR/env-$FENCEKIT_CLIENT\"";
  // It records nothing: --min-operations 0 says that is expected.
  auto r = PauseTest(worker, {"--runs", "1", "--pauses", "0", "--run-length", "300ms", "--lock",
                              "job-7", "--min-operations", "0", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LastLine(r.out), "pause-runs: runs=1 failed_runs=0 expired_leases=0 operations=0");
  const std::string env = ReadWholeFile(Run(0) + "/env-1");
  EXPECT_NE(env.find("FENCING_LOCK=job-7\n"), std::string::npos) << env;
  EXPECT_TRUE(testing::Contains(env, "FENCING_TOKEN=[1-9][0-9]*\n")) << env;
  EXPECT_TRUE(testing::Contains(env, "FENCING_OWNER=[0-9a-f]{32}\n")) << env;
  EXPECT_NE(env.find("FENCEKIT_RUN=0\n"), std::string::npos) << env;
  EXPECT_NE(env.find("FENCEKIT_CLIENT=1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("FENCEKIT_RUN_DIR=" + Run(0) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("FENCEKIT_HISTORY=" + Run(0) + "/client-1.history.jsonl\n"), std::string::npos)
      << env;
}

// One lock service for the whole command (here a redis-server it starts): a store that keeps
// its fences across runs never sees a token go back.
TEST_F(PauseWorkerTest, TokensOnlyGrowAcrossRuns) {
  auto r =
      PauseTest("echo \"$FENCING_TOKEN\" >> \"$FENCEKIT_RUN_DIR/tokens\"",
                {"--runs", "2", "--pauses", "0", "--run-length", "300ms", "--start-redis",
                 "--min-operations", "0", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto tokens = [&](int run) {
    std::vector<long long> t;
    std::istringstream in(ReadWholeFile(Run(run) + "/tokens"));
    for (long long v; in >> v;) t.push_back(v);
    return t;
  };
  const auto first = tokens(0), second = tokens(1);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_LT(*std::max_element(first.begin(), first.end()),
            *std::min_element(second.begin(), second.end()));
}

TEST_F(PauseWorkerTest, PausedWorkersOutliveTheirLeasesAndTheBuiltInCheckCatchesTheLostUpdate) {
  // No fencing at all: the file counter trusts the lock, so a paused holder's late write loses
  // an update, which shows as two cas from the same value.
  auto r = PauseTest(kFileCounter, {"--runs", "3", "--ttl", "100ms", "--run-length", "1500ms",
                                    "--pauses", "12", "-q"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  const std::string last = LastLine(r.out);
  const std::vector<std::string> m = testing::FullMatchGroups(
      last, "pause-runs: runs=3 failed_runs=([0-9]+) expired_leases=([0-9]+) operations=([0-9]+)");
  ASSERT_FALSE(m.empty()) << last;
  EXPECT_GT(std::stoi(m[1]), 0) << r.err;
  EXPECT_GT(std::stoi(m[2]), 0) << r.err;
  EXPECT_GT(std::stoi(m[3]), 0) << r.err;
  // Each failing run names the window and leaves a timeline with the operations circled.
  int timelines = 0;
  for (int run = 0; run < 3; ++run) {
    const std::string report = ReadWholeFile(Run(run) + "/report.txt");
    if (report.find("FAILED") == std::string::npos) continue;
    const std::string page = ReadWholeFile(Run(run) + "/timeline.html");
    EXPECT_NE(page.find("flagged"), std::string::npos) << "run " << run;
    EXPECT_NE(page.find("worker 0"), std::string::npos) << "run " << run;
    EXPECT_NE(page.find("paused"), std::string::npos) << "run " << run;
    // The report's lines are those of the merged history, and say so.
    EXPECT_NE(report.find("[history.jsonl line "), std::string::npos) << report;
    ++timelines;
  }
  EXPECT_EQ(timelines, std::stoi(m[1]));
}

TEST_F(PauseWorkerTest, AGoodCheckPassesEveryRunAndATimelineIsLeftOnlyForFailures) {
  auto r = PauseTest("true", {"--runs", "2", "--run-length", "300ms", "--check",
                              "test -s \"$FENCEKIT_RUN_DIR/client-0.events.jsonl\"", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LastLine(r.out).substr(0, 36), "pause-runs: runs=2 failed_runs=0 exp");
  EXPECT_FALSE(std::filesystem::exists(Run(0) + "/timeline.html"));
}

TEST_F(PauseWorkerTest, ACheckThatExitsNonZeroFailsItsRunWithItsCodeAndOutput) {
  auto r = PauseTest("true", {"--runs", "2", "--run-length", "300ms", "--check",
                              "echo 'checking <run>'; exit 3", "-q"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(LastLine(r.out).substr(0, 36), "pause-runs: runs=2 failed_runs=2 exp");
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("FAILED\n--check exit 3"), std::string::npos) << report;
  EXPECT_NE(report.find("checking <run>"), std::string::npos) << report;
  const std::string page = ReadWholeFile(Run(0) + "/timeline.html");
  EXPECT_NE(page.find("checking &lt;run&gt;"), std::string::npos);  // quoted, encoded
}

// Started with SIGCHLD ignored (bash passes an ignored signal on across exec; dash does not),
// the kit still reads its children's exit statuses: the failing check is not a clean exit.
TEST_F(PauseWorkerTest, ACheckFailsItsRunAlsoWhenTheKitWasStartedWithSigchldIgnored) {
  auto r = RunCommand({"bash", "-c", "trap '' CHLD; exec \"$@\"", "bash", FencectlBinary(),
                       "pause-test", "--worker", "true", "--work-dir", dir_.File("work"), "--keep",
                       "--runs", "1", "--run-length", "300ms", "--check", "exit 3", "-q"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("FAILED\n--check exit 3"), std::string::npos) << report;
}

// A check that crashed judged nothing: the harness says so (1), never a violation (4).
TEST_F(PauseWorkerTest, ACheckThatCrashesStopsTheCommandAsNotJudged) {
  auto r = PauseTest("true", {"--runs", "2", "--run-length", "300ms", "--check",
                              "echo 'checking <run>'; kill -SEGV $$", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--check was killed by signal 11 in run 0, so it did not judge the run"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("checking <run>"), std::string::npos) << r.err;
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("NOT JUDGED"), std::string::npos) << report;
  EXPECT_EQ(report.find("passed"), std::string::npos) << report;
}

TEST_F(PauseWorkerTest, AWorkerThatIgnoresSigtermIsKilledAndTheRunEnds) {
  // Client 0's worker outlives the run and shrugs off SIGTERM; the others work.
  const std::string worker = "if [ \"$FENCEKIT_CLIENT\" = 0 ]; then trap '' TERM; sleep 30; fi";
  const auto began = std::chrono::steady_clock::now();
  auto r = PauseTest(worker, {"--runs", "1", "--pauses", "0", "--run-length", "300ms",
                              "--kill-grace", "200ms", "--worker-timeout", "10s",
                              "--min-operations", "0"});
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, std::chrono::seconds(10));  // not the worker's 30 s
  const std::string events = ReadWholeFile(Run(0) + "/client-0.events.jsonl");
  EXPECT_NE(events.find("killed by signal 9 after SIGKILL (the run was over)"), std::string::npos)
      << events;
  // Stopped by the kit at the run's end: not counted as the worker's failure.
  EXPECT_NE(r.err.find("failed_invocations=0"), std::string::npos) << r.err;
}

TEST_F(PauseWorkerTest, AWorkerThatAlwaysCrashesStopsTheCommandNamingItsLog) {
  auto r = PauseTest("echo 'no such store' >&2; kill -SEGV $$",
                     {"--runs", "5", "--run-length", "300ms", "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");  // no summary line: the harness could not run the worker
  EXPECT_NE(r.err.find("no worker invocation exited 0 in run 0"), std::string::npos) << r.err;
  // How it ended, and what it said, in the message itself.
  EXPECT_NE(r.err.find("the last ended with killed by signal 11"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the last lines of " + Run(0) + "/client-"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  no such store"), std::string::npos) << r.err;
  // The log it names holds it: whichever client crashed last (client 0 may not have started
  // before another's crash stopped the run).
  const std::vector<std::string> m = testing::Search(r.err, R"(the last lines of (\S+\.log):)");
  ASSERT_FALSE(m.empty()) << r.err;
  EXPECT_NE(ReadWholeFile(m[1]).find("no such store"), std::string::npos) << m[1];
  // The run the harness stopped is not reported as passed.
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("NOT JUDGED"), std::string::npos) << report;
  EXPECT_EQ(report.find("passed"), std::string::npos) << report;
}

TEST_F(PauseWorkerTest, AWorkerThatSometimesCrashesIsCountedAndTheRunsGoOn) {
  auto r = PauseTest("[ \"$FENCEKIT_CLIENT\" != 1 ] || kill -SEGV $$",
                     {"--runs", "2", "--run-length", "300ms", "--pauses", "0", "--min-operations",
                      "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::Contains(r.err, "failed_invocations=[1-9]")) << r.err;
  EXPECT_NE(ReadWholeFile(Run(0) + "/client-1.events.jsonl").find("killed by signal 11"),
            std::string::npos);
}

TEST_F(PauseWorkerTest, AMalformedHistoryLineStopsTheCommandNamingTheFileAndLine) {
  auto r = PauseTest("echo '{\"op\":\"read\"}' >> \"$FENCEKIT_HISTORY\"",
                     {"--runs", "1", "--run-length", "200ms", "--pauses", "0", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a worker recorded a malformed history line: " + Run(0) + "/client-"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(".history.jsonl line 1: field \"key\" is missing"), std::string::npos)
      << r.err;
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("NOT JUDGED"), std::string::npos) << report;
}

TEST_F(PauseWorkerTest, SetupRunsBeforeEachRunAndItsFailureStopsTheCommand) {
  auto ok = PauseTest("test -f \"$FENCEKIT_RUN_DIR/ready\"",
                      {"--runs", "2", "--run-length", "200ms", "--pauses", "0", "--setup",
                       "touch \"$FENCEKIT_RUN_DIR/ready\"", "--min-operations", "0", "-q"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  auto bad = PauseTest("true", {"--runs", "2", "--run-length", "200ms", "--setup",
                                "echo 'database down'; exit 3", "-q"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--setup exit 3 in run 0"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("database down"), std::string::npos) << bad.err;
}

// --- Mistakes: the harness never passes a run it did not check, and tells its own failure (1)
// from a violation (4). docs/testing-with-pauses.md, "Mistakes and what the kit says".

// One `read` of "c" (value "v") with the given start and end, appended to the history.
std::string RecordRead(const std::string& start, const std::string& end) {
  return "printf '{\"op\":\"read\",\"key\":\"c\",\"value\":\"v\",\"start_us\":%s,\"end_us\":%s,"
         "\"outcome\":\"ok\"}\\n' " +
         start + " " + end + " >> \"$FENCEKIT_HISTORY\"";
}

TEST_F(PauseWorkerTest, AWorkerThatRecordsNothingIsNotJudgedButStopsTheCommand) {
  auto r = PauseTest("true", {"--runs", "2", "--run-length", "300ms", "--pauses", "0", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");  // no summary line: nothing was judged
  EXPECT_NE(r.err.find("nothing was checked: no worker recorded an operation"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("client-0.log to client-2.log in " + Run(0)), std::string::npos) << r.err;
  const std::string report = ReadWholeFile(Run(0) + "/report.txt");
  EXPECT_NE(report.find("NOT JUDGED"), std::string::npos) << report;
  EXPECT_EQ(report.find("passed"), std::string::npos) << report;
  EXPECT_FALSE(std::filesystem::exists(Run(1)));  // stopped at the first run
}

TEST_F(PauseWorkerTest, MinOperationsRaisesTheBarAndTheSummaryCountsWhatWasChecked) {
  // Each invocation records one read; every run has several invocations, never 100,000.
  const std::string worker = "t=$(date +%s%6N); " + RecordRead("$t", "$t");
  // (A read of "v" from a register never written is not linearizable: the check would fail
  // the run. A --check that passes judges it instead, and counts the merged lines.)
  auto counted = PauseTest(worker, {"--runs", "2", "--run-length", "300ms", "--pauses", "0",
                                    "--check", "true", "--min-operations", "1", "-q"});
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  const std::string last = LastLine(counted.out);
  const std::vector<std::string> m = testing::FullMatchGroups(
      last, "pause-runs: runs=2 failed_runs=0 expired_leases=0 operations=([0-9]+)");
  ASSERT_FALSE(m.empty()) << last;
  EXPECT_GE(std::stoi(m[1]), 2);
  auto too_few = PauseTest(worker, {"--runs", "2", "--run-length", "300ms", "--pauses", "0",
                                    "--check", "true", "--min-operations", "100000", "-q"});
  EXPECT_EQ(too_few.exit_code, 1) << too_few.err;
  EXPECT_NE(too_few.err.find("nothing was checked: the merged history " + Run(0) +
                             "/history.jsonl has "),
            std::string::npos)
      << too_few.err;
  EXPECT_NE(too_few.err.find("fewer than --min-operations 100000"), std::string::npos)
      << too_few.err;
  auto negative = PauseTest("true", {"--min-operations", "-1"});
  EXPECT_EQ(negative.exit_code, 64) << negative.err;
}

TEST_F(PauseWorkerTest, AnEmptyWorkerIsAUsageErrorNotTheBuiltInWorkload) {
  for (const char* worker : {"", "  "}) {
    auto r = PauseTest(worker, {"--runs", "1"});
    EXPECT_EQ(r.exit_code, 64) << r.err;
    EXPECT_NE(r.err.find("--worker is empty"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(PauseWorkerTest, AnEmptyCheckOrSetupCannotBeStartedAndSaysSo) {
  for (const char* option : {"--check", "--setup"}) {
    auto r = PauseTest("true", {"--runs", "1", option, ""});
    EXPECT_EQ(r.exit_code, 1) << option << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(option) + " is an empty command"), std::string::npos)
        << r.err;
  }
}

TEST_F(PauseWorkerTest, ACheckThatCannotBeStartedStopsTheCommandNotCountedAsAViolation) {
  const std::string not_executable = dir_.File("check.sh");
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";  // no x bit
  for (const auto& [check, code] : {std::pair{std::string("no-such-checker-xyz"), 127},
                                    std::pair{not_executable, 126}}) {
    auto r = PauseTest("true", {"--runs", "2", "--run-length", "200ms", "--pauses", "0",
                                "--check", check, "-q"});
    EXPECT_EQ(r.exit_code, 1) << check << ": " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("--check cannot be started in run 0: exit " + std::to_string(code)),
              std::string::npos)
        << r.err;
  }
}

TEST_F(PauseWorkerTest, ACheckThatRunsOutOfTimeStopsTheCommand) {
  auto r = PauseTest("true", {"--runs", "2", "--run-length", "200ms", "--pauses", "0", "--check",
                              "sleep 30", "--check-timeout", "300ms", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--check ran out of time in run 0"), std::string::npos) << r.err;
}

TEST_F(PauseWorkerTest, ASetupThatCannotBeStartedSaysSo) {
  auto r = PauseTest("true", {"--runs", "1", "--run-length", "200ms", "--setup",
                              "no-such-setup-xyz", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--setup exit 127 in run 0 (the shell found no such command"),
            std::string::npos)
      << r.err;
  EXPECT_NE(ReadWholeFile(Run(0) + "/report.txt").find("NOT JUDGED"), std::string::npos);
}

TEST_F(PauseWorkerTest, AWorkerThatCannotBeStartedStopsTheCommandWithItsExitAndLog) {
  auto r = PauseTest("no-such-worker-xyz --go",
                     {"--runs", "3", "--run-length", "300ms", "--pauses", "0", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("the --worker command cannot be started"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ended with exit 127, the shell found no such command"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no-such-worker-xyz: not found"), std::string::npos) << r.err;  // its log
  EXPECT_NE(ReadWholeFile(Run(0) + "/report.txt").find("NOT JUDGED"), std::string::npos);
}

TEST_F(PauseWorkerTest, MillisecondTimestampsStopTheCommandNamingTheUnit) {
  // JavaScript's Date.now(): milliseconds where microseconds are due.
  auto r = PauseTest("t=$(date +%s%3N); " + RecordRead("$t", "$t"),
                     {"--runs", "1", "--run-length", "200ms", "--pauses", "0", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(".history.jsonl line 1: start_us "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not within the run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it looks like milliseconds"), std::string::npos) << r.err;
  // A time in the far future (an hour on) is refused too, without a guess at its unit.
  auto later = PauseTest("t=$(( $(date +%s%6N) + 3600000000 )); " + RecordRead("$t", "$t"),
                         {"--runs", "1", "--run-length", "200ms", "--pauses", "0", "-q"});
  EXPECT_EQ(later.exit_code, 1) << later.err;
  EXPECT_NE(later.err.find("is not within the run"), std::string::npos) << later.err;
  EXPECT_EQ(later.err.find("it looks like"), std::string::npos) << later.err;
}

TEST_F(PauseWorkerTest, ABuiltInCheckThatCannotDecideStopsTheCommand) {
  // 40 writes all concurrent, 40 reads of them and a read of a value never written: a search
  // that does not end within 50 ms (linearizability_test's pathological history), recorded once.
  const std::string file = dir_.File("hard.jsonl");
  {
    const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::ofstream out(file);
    auto line = [&](const char* op, int v, long long start, long long end) {
      out << "{\"op\":\"" << op << "\",\"key\":\"x\",\"value\":" << v
          << ",\"start_us\":" << now + start << ",\"end_us\":" << now + end
          << ",\"outcome\":\"ok\"}\n";
    };
    for (int i = 0; i < 40; ++i) line("write", i, i, 1000);
    for (int i = 0; i < 40; ++i) line("read", i, 500 + i, 1000 + i);
    line("read", -1, 2000, 2001);
  }
  const std::string worker = "[ -e \"$FENCEKIT_RUN_DIR/once\" ] || { touch \"$FENCEKIT_RUN_DIR/once\"; "
                             "cat '" + file + "' >> \"$FENCEKIT_HISTORY\"; }";
  auto r = PauseTest(worker, {"--runs", "1", "--run-length", "200ms", "--pauses", "0",
                              "--check-timeout", "50ms", "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the built-in check could not decide run 0 within --check-timeout 50ms"),
            std::string::npos)
      << r.err;
}

TEST_F(PauseWorkerTest, TheSummaryOnStderrSaysOneRunNotOneRuns) {
  auto r = PauseTest("true", {"--runs", "1", "--run-length", "200ms", "--pauses", "0",
                              "--min-operations", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("pause-test: 1 run of --worker, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0 operations checked; 0 runs with a lease"), std::string::npos) << r.err;
}

TEST_F(PauseWorkerTest, OptionsOfTheOtherModeAreUsageErrors) {
  auto a = RunCommand({FencectlBinary(), "pause-test", "--check", "true"});
  EXPECT_EQ(a.exit_code, 64);
  EXPECT_NE(a.err.find("--check needs --worker CMD"), std::string::npos) << a.err;
  auto b = RunCommand({FencectlBinary(), "pause-test", "--worker", "true", "--no-fencing"});
  EXPECT_EQ(b.exit_code, 64);
  EXPECT_NE(b.err.find("--no-fencing is for the built-in workload"), std::string::npos) << b.err;
  auto c = RunCommand({FencectlBinary(), "pause-test", "--worker", "true", "--clients", "1"});
  EXPECT_EQ(c.exit_code, 64);
}

}  // namespace
}  // namespace fencekit
