// `fencectl pause-test` end to end, as CI runs it: 50 seeded runs on the embedded SQLite lock
// service and on a real redis-server, 12 on a real etcd (its leases are whole seconds, so each run
// is 5s) and 10 on a 3-member etcd whose leader is killed and restarted in each run, and the
// --no-fencing control arm on each backend, which must lose updates (proof that the runs can
// catch the bug). The long run is in docs/testing-with-pauses.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "support/etcd_server.h"
#include "support/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::RedisServer;

struct Summary {
  int runs = -1, stale = -1, lost = -1, expired = -1, runs_with_expired = -1;
  int etcd_leader_kills = -1;  // with --kill-etcd-leader
};

Summary RunPauseTest(std::vector<std::string> extra) {
  std::vector<std::string> argv = {testing::FencectlBinary(), "pause-test", "--quiet", "--fenced",
                                   testing::FencedBinary()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = testing::RunCommand(argv);
  Summary s;
  std::smatch m;
  // The last line of stdout, exactly.
  std::regex line(
      R"(pause-runs: runs=(\d+) stale_accepted=(\d+) lost_updates=(\d+) expired_leases=(\d+)\n$)");
  EXPECT_TRUE(std::regex_search(r.out, m, line)) << "stdout: " << r.out << "\nstderr: " << r.err;
  if (!m.empty()) {
    s.runs = std::stoi(m[1]);
    s.stale = std::stoi(m[2]);
    s.lost = std::stoi(m[3]);
    s.expired = std::stoi(m[4]);
  }
  std::regex expired_runs(R"((\d+) with a lease that expired)");
  if (std::regex_search(r.err, m, expired_runs)) s.runs_with_expired = std::stoi(m[1]);
  std::regex leader_kills(R"(etcd leader SIGKILLed and restarted in (\d+) of \d+ runs)");
  if (std::regex_search(r.err, m, leader_kills)) s.etcd_leader_kills = std::stoi(m[1]);
  bool control = std::find(extra.begin(), extra.end(), "--no-fencing") != extra.end();
  bool violated = s.stale > 0 || s.lost > 0;
  EXPECT_EQ(r.exit_code, control == violated ? 0 : 4) << r.err;
  return s;
}

void ExpectSafe(const Summary& s, int runs) {
  EXPECT_EQ(s.runs, runs);
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  // The pauses really outlived leases, in most runs.
  EXPECT_GT(s.runs_with_expired, runs / 2);
}

TEST(PauseRunsTest, SqliteFiftyRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  ExpectSafe(RunPauseTest({"--runs", "50", "--seed", "11"}), 50);
}

TEST(PauseRunsTest, RedisFiftyRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  RedisServer redis;
  ExpectSafe(RunPauseTest({"--runs", "50", "--seed", "12", "--locks", redis.uri()}), 50);
}

// etcd leases are at least 1s (this test etcd's minimum): pauses of 0.5-3s, 10 per 5s run, and
// writes delayed up to 300ms, so that holders hold long enough for the pauses to hit them (a
// paused waiter holds up etcd's line instead, until its lease expires).
const std::vector<std::string> kEtcdRuns = {"--ttl",    "1s", "--run-length", "5s",
                                            "--pauses", "10", "--max-delay",  "300ms"};

TEST(PauseRunsTest, EtcdTwelveRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  testing::EtcdCluster etcd(1);
  std::vector<std::string> args = {"--runs", "12", "--seed", "17", "--locks", etcd.uri()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  ExpectSafe(RunPauseTest(args), 12);
}

// A 3-member cluster of the command's own: in every run the leader is SIGKILLed at a seeded
// moment and restarted on its data later in the run, while clients hold, wait and write.
TEST(PauseRunsTest, EtcdLeaderKilledAndRestartedMidRunStaysSafe) {
  std::vector<std::string> args = {
      "--runs", "10", "--seed", "19", "--start-etcd", "3", "--kill-etcd-leader"};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  Summary s = RunPauseTest(args);
  EXPECT_EQ(s.runs, 10);
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  EXPECT_EQ(s.etcd_leader_kills, 10);
  // The election and the clients' failover take part of each run: a lease expired in use in
  // about 2 runs of 3 (67 of 100 in docs/testing-with-pauses.md); at least 2 of these 10.
  EXPECT_GE(s.runs_with_expired, 2);
}

TEST(PauseRunsTest, KillEtcdLeaderWithoutAnOwnedClusterIsRefusedLeavingNoFolder) {
  testing::TempDir tmp;
  const std::vector<std::string> env = {"TMPDIR=" + tmp.path()};
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1",
                                "--kill-etcd-leader", "--fenced", testing::FencedBinary()},
                               env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kill-etcd-leader needs an etcd cluster this command owns: add "
                       "--start-etcd 3"),
            std::string::npos)
      << r.err;
  r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1", "--start-etcd",
                           "1", "--kill-etcd-leader", "--fenced", testing::FencedBinary()},
                          env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("needs --start-etcd 3 or more"), std::string::npos) << r.err;
  // Refused before a work directory was made.
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(PauseRunsTest, SqliteWithStoreKillsAndSlowWritesStaysSafe) {
  ExpectSafe(RunPauseTest({"--runs", "10", "--seed", "13", "--kill-store", "--max-delay", "5ms"}),
             10);
}

TEST(PauseRunsTest, RedisRestartedEmptyMidRunStaysSafe) {
  ExpectSafe(RunPauseTest({"--runs", "10", "--seed", "16", "--start-redis", "--restart-locks"}),
             10);
}

TEST(PauseRunsTest, RestartLocksWithoutAnOwnedServiceIsRefused) {
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1",
                                "--restart-locks", "--fenced", testing::FencedBinary()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--start-redis"), std::string::npos) << r.err;
}

TEST(PauseRunsTest, SqliteControlArmWithoutFencingLosesUpdates) {
  Summary s = RunPauseTest({"--runs", "20", "--seed", "14", "--no-fencing"});
  EXPECT_EQ(s.runs, 20);
  EXPECT_GT(s.lost, 0);
}

TEST(PauseRunsTest, RedisControlArmWithoutFencingLosesUpdates) {
  RedisServer redis;
  Summary s =
      RunPauseTest({"--runs", "20", "--seed", "15", "--no-fencing", "--locks", redis.uri()});
  EXPECT_EQ(s.runs, 20);
  EXPECT_GT(s.lost, 0);
}

TEST(PauseRunsTest, EtcdControlArmWithoutFencingLosesUpdates) {
  testing::EtcdCluster etcd(1);
  std::vector<std::string> args = {"--runs",       "8",       "--seed",  "18",
                                   "--no-fencing", "--locks", etcd.uri()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  Summary s = RunPauseTest(args);
  EXPECT_EQ(s.runs, 8);
  EXPECT_GT(s.lost, 0);
}

}  // namespace
}  // namespace fencekit
