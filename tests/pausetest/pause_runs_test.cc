// `fencectl pause-test` end to end. At full length (the soak tier, ./scripts/test --full): 50
// seeded runs on the embedded SQLite lock service and on a real redis-server, 12 on a real etcd
// (its leases are whole seconds, so each run is 5s) and 10 on a 3-member etcd whose leader is
// killed and restarted in each run, 12 on a 3-member ZooKeeper ensemble (a lease is a session),
// and the --no-fencing control arm on each backend, which must
// lose updates (proof that the runs can catch the bug). The short arm of each (the default
// ladder) runs a few of the same seeded runs. The long run is in docs/testing-with-pauses.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fencekit/procutil/zookeeper_ensemble.h"
#include "support/servers/etcd_server.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::RedisServer;

struct Summary {
  int runs = -1, stale = -1, lost = -1, expired = -1, runs_with_expired = -1;
  int etcd_leader_kills = -1;  // with --kill-etcd-leader
};

Summary RunPauseTest(std::vector<std::string> extra) {
  // The files of failed runs go under the test's own directory, removed at its end: the control
  // arms fail runs on purpose, and the tool keeps a failed run's files for whoever debugs it.
  testing::TempDir tmp;
  std::vector<std::string> argv = {
      testing::FencectlBinary(), "pause-test", "--quiet",       "--fenced",
      testing::FencedBinary(),   "--work-dir", tmp.File("runs")};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = testing::RunCommand(argv);
  Summary s;
  // The last line of stdout, exactly.
  const std::string line =
      R"(pause-runs: runs=(\d+) stale_accepted=(\d+) lost_updates=(\d+) expired_leases=(\d+)\n$)";
  std::vector<std::string> m = testing::Search(r.out, line);
  EXPECT_FALSE(m.empty()) << "stdout: " << r.out << "\nstderr: " << r.err;
  if (!m.empty()) {
    s.runs = std::stoi(m[1]);
    s.stale = std::stoi(m[2]);
    s.lost = std::stoi(m[3]);
    s.expired = std::stoi(m[4]);
  }
  m = testing::Search(r.err, R"((\d+) with a lease that expired)");
  if (!m.empty()) s.runs_with_expired = std::stoi(m[1]);
  m = testing::Search(r.err, R"(etcd leader SIGKILLed and restarted in (\d+) of \d+ runs)");
  if (!m.empty()) s.etcd_leader_kills = std::stoi(m[1]);
  bool control = std::find(extra.begin(), extra.end(), "--no-fencing") != extra.end();
  bool violated = s.stale > 0 || s.lost > 0;
  EXPECT_EQ(r.exit_code, control == violated ? 0 : 4) << r.err;
  return s;
}

// `runs` seeded runs from `seed` (the soak's arm decides how many), then `extra`.
Summary RunSeeded(int runs, int seed, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--runs", std::to_string(runs), "--seed", std::to_string(seed)};
  args.insert(args.end(), extra.begin(), extra.end());
  Summary s = RunPauseTest(args);
  EXPECT_EQ(s.runs, runs);
  return s;
}

void ExpectSafe(const Summary& s) {
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  // The pauses really outlived leases: in most runs at full length; in some, in a short arm.
  if (testing::FullSoak()) {
    EXPECT_GT(s.runs_with_expired, s.runs / 2);
  } else {
    EXPECT_GE(s.runs_with_expired, 1);
  }
}

// For arms that kill or restart a server in every run: the restart takes part of each run, and
// how many pauses land on a holder then depends on the machine's load (8 or 9 runs of 10 on a
// quiet machine, 4 of 10 once on CI's busy one under ASan), so at least 2 at full length.
void ExpectSafeAcrossRestarts(const Summary& s) {
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  EXPECT_GE(s.runs_with_expired, testing::FullSoak() ? 2 : 1);
}

TEST(PauseRunsSoak, SqliteSeededRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  ExpectSafe(RunSeeded(testing::SoakLength(5, 50), 11));
}

TEST(PauseRunsSoak, RedisSeededRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  RedisServer redis;
  ExpectSafe(RunSeeded(testing::SoakLength(5, 50), 12, {"--locks", redis.uri()}));
}

// etcd leases are at least 1s (this test etcd's minimum): pauses of 0.5-3s, 10 per 5s run, and
// writes delayed up to 300ms, so that holders hold long enough for the pauses to hit them (a
// paused waiter holds up etcd's line instead, until its lease expires).
const std::vector<std::string> kEtcdRuns = {"--ttl",    "1s", "--run-length", "5s",
                                            "--pauses", "10", "--max-delay",  "300ms"};

TEST(PauseRunsSoak, EtcdSeededRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  testing::EtcdCluster etcd(1);
  std::vector<std::string> args = {"--locks", etcd.uri()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  // 5 runs in the short arm: on a loaded machine none of 3 once had a pause outlive a lease.
  ExpectSafe(RunSeeded(testing::SoakLength(5, 12), 17, args));
}

// A 3-member cluster of the command's own: in every run the leader is SIGKILLed at a seeded
// moment and restarted on its data later in the run, while clients hold, wait and write.
TEST(PauseRunsSoak, EtcdLeaderKilledAndRestartedMidRunStaysSafe) {
  std::vector<std::string> args = {"--start-etcd", "3", "--kill-etcd-leader"};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  const int runs = testing::SoakLength(2, 10);
  Summary s = RunSeeded(runs, 19, args);
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  EXPECT_EQ(s.etcd_leader_kills, runs);
  // The election and the clients' failover take part of each run: a lease expired in use in
  // about 2 runs of 3 (67 of 100 in docs/testing-with-pauses.md); at least 2 of the soak's 10.
  if (testing::FullSoak()) {
    EXPECT_GE(s.runs_with_expired, 2);
  }
}

// A 3-member ZooKeeper ensemble (100ms ticks: sessions of 1s are granted as asked), with the
// etcd arms' pauses: a paused holder's session expires on the ensemble.
std::unique_ptr<procutil::ZookeeperEnsemble> StartZookeeper(const testing::TempDir& dir) {
  auto zk = std::make_unique<procutil::ZookeeperEnsemble>();
  Status s = zk->Start({.members = 3, .dir = dir.File("zk")});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return zk;
}

TEST(PauseRunsSoak, ZookeeperSeededRunsAcceptNoStaleTokenAndLoseNoUpdate) {
  testing::TempDir dir;
  auto zk = StartZookeeper(dir);
  std::vector<std::string> args = {"--locks", "zk://" + zk->connect_string()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  // Five runs in the short arm: with about half of the runs outliving a lease, three had none
  // in a fresh-clone run on a slow machine (about 1 in 8 at one half; 1 in 32 with five).
  const Summary s = RunSeeded(testing::SoakLength(5, 12), 23, args);
  EXPECT_EQ(s.stale, 0);
  EXPECT_EQ(s.lost, 0);
  // Fewer runs have a lease outlived by a pause than on etcd (6 of 12 at full length in a
  // fresh-clone CI run at 0d8f095, beside the rest of the suite): at least a third then.
  EXPECT_GE(s.runs_with_expired, testing::FullSoak() ? s.runs / 3 : 1);
}

TEST(PauseRunsTest, KillEtcdLeaderWithoutAnOwnedClusterIsRefusedLeavingNoFolder) {
  testing::TempDir tmp;
  const std::vector<std::string> env = {"TMPDIR=" + tmp.path()};
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1",
                                "--kill-etcd-leader", "--fenced", testing::FencedBinary()},
                               env);
  EXPECT_EQ(r.exit_code, 64) << "a usage error";
  EXPECT_NE(r.err.find("--kill-etcd-leader needs an etcd cluster this command owns: add "
                       "--start-etcd 3"),
            std::string::npos)
      << r.err;
  r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1", "--start-etcd",
                           "1", "--kill-etcd-leader", "--fenced", testing::FencedBinary()},
                          env);
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("needs --start-etcd 3 or more"), std::string::npos) << r.err;
  // Refused before a work directory was made.
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(PauseRunsSoak, SqliteWithStoreKillsAndSlowWritesStaysSafe) {
  ExpectSafeAcrossRestarts(
      RunSeeded(testing::SoakLength(3, 10), 13, {"--kill-store", "--max-delay", "5ms"}));
}

TEST(PauseRunsSoak, RedisRestartedEmptyMidRunStaysSafe) {
  ExpectSafeAcrossRestarts(
      RunSeeded(testing::SoakLength(3, 10), 16, {"--start-redis", "--restart-locks"}));
}

// A Redis restarted empty counts again from the clients' highest seen token, so a client that
// did not see the last grant before the restart can be granted the same token as its holder.
// The clients send the lease's service id, and the store, bound to the old id, refuses the new
// service's tokens (the runs once lost an update through two clients holding token 110).
TEST(PauseRunsTest, AfterARedisRestartedEmptyTheStoreRefusesTheNewServicesTokens) {
  testing::TempDir tmp;
  auto r =
      testing::RunCommand({testing::FencectlBinary(), "pause-test", "--quiet", "--runs", "1",
                           "--seed", "16", "--start-redis", "--restart-locks", "--keep",
                           "--work-dir", tmp.File("runs"), "--fenced", testing::FencedBinary()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream history(tmp.File("runs/run-0/history.jsonl"));
  int refused = 0;
  for (std::string line; std::getline(history, line);) {
    refused += line.find("\"outcome\":\"stale\"") != std::string::npos &&
               line.find("wrong_service") != std::string::npos;
  }
  EXPECT_GT(refused, 0) << "no write refused as from another lock service";
}

TEST(PauseRunsTest, RestartLocksWithoutAnOwnedServiceIsRefused) {
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--runs", "1",
                                "--restart-locks", "--fenced", testing::FencedBinary()});
  EXPECT_EQ(r.exit_code, 64) << "a usage error";
  EXPECT_NE(r.err.find("--start-redis"), std::string::npos) << r.err;
}

// The summary names the runs' folder only when it is still there: a passing run's temporary
// folder is removed, and then the line says so instead.
TEST(PauseRunsTest, TheSummaryNeverNamesAFolderItRemoved) {
  testing::TempDir tmp;
  const std::vector<std::string> env = {"TMPDIR=" + tmp.path()};
  const std::string files = R"(files: (/\S+))";
  for (bool keep : {false, true}) {
    std::vector<std::string> argv = {
        testing::FencectlBinary(), "pause-test", "--quiet", "--runs", "1", "--fenced",
        testing::FencedBinary()};
    if (keep) argv.push_back("--keep");
    auto r = testing::RunCommand(argv, env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (keep) {
      const std::vector<std::string> m = testing::Search(r.err, files);
      ASSERT_FALSE(m.empty()) << r.err;
      EXPECT_TRUE(std::filesystem::is_directory(m[1])) << r.err;
    } else {
      EXPECT_FALSE(testing::Contains(r.err, files)) << "it names a folder it removed: " << r.err;
      EXPECT_NE(r.err.find("files: none kept"), std::string::npos) << r.err;
      EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << r.err;
    }
  }
}

// The control arms delay each write by up to 20ms, widening the read-modify-write that a pause
// must hit: without it, on a busy machine, only about one run in three loses an update, and a
// short arm of 5 runs would catch none one time in six. With it, about four in five do.
const std::vector<std::string> kControl = {"--no-fencing", "--max-delay", "20ms"};

TEST(PauseRunsSoak, SqliteControlArmWithoutFencingLosesUpdates) {
  EXPECT_GT(RunSeeded(testing::SoakLength(5, 20), 14, kControl).lost, 0);
}

TEST(PauseRunsSoak, RedisControlArmWithoutFencingLosesUpdates) {
  RedisServer redis;
  std::vector<std::string> args = kControl;
  args.insert(args.end(), {"--locks", redis.uri()});
  EXPECT_GT(RunSeeded(testing::SoakLength(5, 20), 15, args).lost, 0);
}

// At full length only: an etcd run (5s) loses an update in about two runs of five, so a short
// arm that reliably catches one would not be short.
TEST(PauseRunsFullSoak, EtcdControlArmWithoutFencingLosesUpdates) {
  testing::EtcdCluster etcd(1);
  std::vector<std::string> args = {"--no-fencing", "--locks", etcd.uri()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  EXPECT_GT(RunSeeded(8, 18, args).lost, 0);
}

// At full length only, as etcd's: 5s runs.
TEST(PauseRunsFullSoak, ZookeeperControlArmWithoutFencingLosesUpdates) {
  testing::TempDir dir;
  auto zk = StartZookeeper(dir);
  std::vector<std::string> args = {"--no-fencing", "--locks", "zk://" + zk->connect_string()};
  args.insert(args.end(), kEtcdRuns.begin(), kEtcdRuns.end());
  EXPECT_GT(RunSeeded(8, 24, args).lost, 0);
}

}  // namespace
}  // namespace fencekit
