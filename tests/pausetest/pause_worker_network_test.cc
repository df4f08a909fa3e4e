// `fencectl pause-test --worker` with the network between a client and the user's store in the
// kit's hands: --proxy NAME=HOST:PORT gives each client a proxy of its own
// (FENCEKIT_PROXY_NAME), and --holds holds a client's traffic, both ways, and its renewals for
// 0.5-3x the ttl: a request sent under a lease arrives after it. With holds only (--pauses 0):
// the curl example worker against fenced, with fencing (no run fails) and against
// `fenced --no-fencing` (a run fails); the Python worker on PostgreSQL through libpq over the
// proxy, with the guard and without (PgThroughProxyFullSoak: --full only, for its length).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"
#include "support/worker_runs.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::ReadWholeFile;
using testing::TempDir;

std::string Example(const std::string& name) {
  return std::string(PAUSE_EXAMPLES_DIR) + "/" + name;
}

using Summary = testing::WorkerRuns;

// `fencectl pause-test --worker WORKER --pauses 0` with a lock service of its own in `dir`,
// then `extra`; `env` is added to the command's (and so its workers') environment.
Summary RunWorker(const TempDir& dir, const std::string& worker,
                  const std::vector<std::string>& extra, const std::vector<std::string>& env) {
  std::vector<std::string> argv = {testing::FencectlBinary(),
                                   "pause-test",
                                   "--worker",
                                   worker,
                                   "--locks",
                                   "sqlite://" + dir.File("locks.db"),
                                   "--work-dir",
                                   dir.File("runs"),
                                   "--pauses",
                                   "0",
                                   "-q"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = testing::RunCommand(argv, env);
  return testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
}

// Each `fencectl pause-test ARGS` exits 64 (a usage error), its message saying the text given.
void ExpectUsageErrors(const std::vector<std::pair<std::vector<std::string>, std::string>>& cases) {
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {testing::FencectlBinary(), "pause-test"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = testing::RunCommand(argv);
    EXPECT_EQ(r.exit_code, 64) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// Measured on the 2-core machine: the control arm failed 5 runs of 6 with 10 holds per run in
// the release build; in the ASan debug build 13 of 24 with no work between the worker's read and
// its write (all 6 of a command would miss about one time in 100), 26 of 30 with 0.1 s
// (2026-12-03). Both arms run the same worker.
const std::vector<std::string> kCurlHolds = {"--holds", "10",           "--seed",
                                             "31",      "--run-length", "1500ms"};
const std::string kCurlHoldsWork = "WORK_SECONDS=0.1";

TEST(PauseWorkerNetworkTest, CurlWorkerWithHeldRequestsAgainstFencedFailsNoRun) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  std::vector<std::string> args = {"--proxy", "store=127.0.0.1:" + std::to_string(fenced.port()),
                                   "--runs", "3"};
  args.insert(args.end(), kCurlHolds.begin(), kCurlHolds.end());
  Summary s = RunWorker(dir, Example("counter-curl.sh"), args,
                        {"FENCED_URL=" + fenced.url(), kCurlHoldsWork});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_GT(s.expired, 0) << "holds outlived leases, without a single pause";
}

TEST(PauseWorkerNetworkTest, CurlWorkerWithHeldRequestsAgainstNoFencingStoreIsCaught) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"), {"--no-fencing"});
  std::vector<std::string> args = {"--proxy", "store=127.0.0.1:" + std::to_string(fenced.port()),
                                   "--runs", "6"};
  args.insert(args.end(), kCurlHolds.begin(), kCurlHolds.end());
  Summary s = RunWorker(dir, Example("counter-curl.sh"), args,
                        {"FENCED_URL=" + fenced.url(), kCurlHoldsWork});
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_GT(s.failed_runs, 0) << s.err;
  // A failing run's timeline draws the holds on the workers' lanes.
  int timelines = 0;
  for (const auto& run : std::filesystem::directory_iterator(dir.File("runs"))) {
    const std::string page = ReadWholeFile(run.path().string() + "/timeline.html");
    if (page.empty()) continue;
    ++timelines;
    EXPECT_NE(page.find("traffic held in the network for "), std::string::npos) << run.path();
  }
  EXPECT_EQ(timelines, s.failed_runs);
}

TEST(PauseWorkerNetworkTest, EachClientGetsAProxyOfItsOwnNamedUpperCased) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  // Each invocation records the address it was given, one file per client.
  const std::string worker =
      "echo \"$FENCEKIT_PROXY_MY_STORE\" > \"$FENCEKIT_RUN_DIR/proxy-$FENCEKIT_CLIENT\"; "
      "curl -s -o /dev/null -w '%{http_code}' \"http://$FENCEKIT_PROXY_MY_STORE/healthz\" "
      "> \"$FENCEKIT_RUN_DIR/health-$FENCEKIT_CLIENT\"";
  auto r = testing::RunCommand({testing::FencectlBinary(),
                                "pause-test",
                                "--worker",
                                worker,
                                "--proxy",
                                "my_store=localhost:" + std::to_string(fenced.port()),
                                "--runs",
                                "1",
                                "--pauses",
                                "0",
                                "--run-length",
                                "500ms",
                                "--min-operations",
                                "0",
                                "--check",
                                "true",
                                "--keep",
                                "--locks",
                                "sqlite://" + dir.File("locks.db"),
                                "--work-dir",
                                dir.File("runs"),
                                "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> seen;
  for (int c = 0; c < 3; ++c) {
    const std::string run = dir.File("runs") + "/run-0/";
    std::string address = ReadWholeFile(run + "proxy-" + std::to_string(c));
    EXPECT_FALSE(testing::Search(address, R"(^127\.0\.0\.1:\d+\n$)").empty()) << address;
    EXPECT_EQ(ReadWholeFile(run + "health-" + std::to_string(c)), "200") << "through client " << c;
    seen.push_back(address);
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
  EXPECT_NE(seen[0], seen[2]);
}

TEST(PauseWorkerNetworkTest, MisusedProxyOptionsAreUsageErrorsSayingWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--worker", "true", "--holds", "2"}, "--holds needs --proxy NAME=HOST:PORT"},
      {{"--worker", "true", "--proxy", "store"}, "--proxy store: no '='"},
      {{"--worker", "true", "--proxy", "store=127.0.0.1"}, "no HOST:PORT after '='"},
      {{"--worker", "true", "--proxy", "store=127.0.0.1:0"}, "PORT must be a number from 1"},
      {{"--worker", "true", "--proxy", "9x=127.0.0.1:80"}, "NAME must be a letter"},
      {{"--worker", "true", "--proxy", "a=127.0.0.1:80", "--proxy", "A=127.0.0.1:81"},
       "--proxy A= is given twice"},
      {{"--worker", "true", "--holds", "-1", "--proxy", "a=127.0.0.1:80"}, "--holds must be >= 0"},
      {{"--holds", "2"}, "--holds needs --worker CMD"},
      {{"--proxy", "a=127.0.0.1:80"}, "--proxy needs --worker CMD"},
  };
  ExpectUsageErrors(cases);
}

TEST(PauseWorkerNetworkTest, AProxyToAHostThatDoesNotResolveStopsTheCommandSayingSo) {
  TempDir dir;
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--worker", "true",
                                "--proxy", "store=no-such-host.invalid:80", "--runs", "1",
                                "--work-dir", dir.File("runs"), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--proxy store=no-such-host.invalid:80: proxy: cannot resolve"),
            std::string::npos)
      << r.err;
}

// --restart-locks with --worker: the Redis of --start-redis SIGKILLed once per run and
// restarted empty; the service's id changes with it. fenced binds a lock's fence to the service
// that first wrote under it and then refuses another's tokens (409 wrong_service): each run
// fences a lock name of its own, so that a run after a restart still has writes to judge.
TEST(PauseWorkerNetworkTest, CurlWorkerWithRedisRestartedEmptyAgainstFencedFailsNoRun) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  const std::string worker =
      "echo \"$FENCING_SERVICE\" >> \"$FENCEKIT_RUN_DIR/services\"; "
      "FENCING_LOCK=\"$FENCING_LOCK/run-$FENCEKIT_RUN\" exec " +
      Example("counter-curl.sh");
  auto r = testing::RunCommand(
      {testing::FencectlBinary(), "pause-test", "--worker", worker, "--start-redis",
       "--restart-locks", "--pauses", "0", "--runs", "3", "--seed", "31", "--run-length", "1500ms",
       "--keep", "--work-dir", dir.File("runs")},
      {"FENCED_URL=" + fenced.url()});
  Summary s = testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
  EXPECT_EQ(s.exit_code, 0) << r.err;
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_NE(r.err.find("3 lock-service faults (Redis restarted empty)"), std::string::npos)
      << r.err;
  // The workers saw the service change where Redis lost its data.
  for (int run = 0; run < 3; ++run) {
    std::istringstream services(
        ReadWholeFile(dir.File("runs") + "/run-" + std::to_string(run) + "/services"));
    std::set<std::string> ids;
    for (std::string id; std::getline(services, id);) ids.insert(id);
    EXPECT_GE(ids.size(), 2u) << "run " << run;
  }
}

// A run that fails (its worker records a read of a value nobody wrote) keeps its timeline: the
// restart is on the lock service's lane.
TEST(PauseWorkerNetworkTest, AFailingRunsTimelineMarksTheLockServiceRestart) {
  TempDir dir;
  const std::string worker =
      "s=$(date +%s%6N); printf '{\"op\":\"read\",\"key\":\"k\",\"value\":\"nobody\","
      "\"start_us\":%s,\"end_us\":%s,\"outcome\":\"ok\"}\\n' \"$s\" \"$(date +%s%6N)\" "
      ">> \"$FENCEKIT_HISTORY\"; sleep 0.05";
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--worker", worker,
                                "--start-redis", "--restart-locks", "--pauses", "0", "--runs", "1",
                                "--run-length", "1500ms", "--work-dir", dir.File("runs"), "-q"});
  Summary s = testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
  ASSERT_EQ(s.failed_runs, 1) << r.err;
  const std::string page = ReadWholeFile(dir.File("runs") + "/run-0/timeline.html");
  EXPECT_NE(page.find("restarted empty (SIGKILL)"), std::string::npos);
}

TEST(PauseWorkerNetworkTest, LockServiceFaultsNeedALockServiceTheCommandOwns) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--worker", "true", "--restart-locks"},
       "--restart-locks needs a lock service this command owns: add --start-redis"},
      {{"--worker", "true", "--kill-etcd-leader", "--start-etcd", "1"},
       "--kill-etcd-leader needs an etcd cluster of 3 or more members"},
      {{"--worker", "true", "--failover-locks"},
       "--failover-locks needs a lock service this command owns: add --start-redis"},
      {{"--worker", "true", "--start-redis", "--failover-locks", "--restart-locks"},
       "--failover-locks and --restart-locks are two faults of the same Redis; give one"},
      {{"--start-redis", "--failover-locks"}, "--failover-locks needs --worker CMD"},
  };
  ExpectUsageErrors(cases);
}

// The Redis shell worker with --restart-locks, its counter in a redis-server of its own: the
// lock service's Redis restarted empty grants again tokens it granted before (a client that saw
// token T asks for T + 1, which the cut-off holder may have), so a guard that compares tokens
// alone lets two holders of one token write. Bound to the service that first claimed it, the
// fence refuses the restarted service's leases. Each run fences a lock name of its own.
class RedisWorkerWithRestartedLocks : public ::testing::Test {
 protected:
  Summary Run(int runs, const std::string& fencing) {
    const std::string per_run = "FENCING_LOCK=\"$FENCING_LOCK/run-$FENCEKIT_RUN\" exec " +
                                Example("counter-redis.sh");
    auto r = testing::RunCommand(
        {testing::FencectlBinary(), "pause-test", "--worker", per_run, "--setup",
         per_run + " --setup", "--start-redis", "--restart-locks", "--pauses", "0", "--runs",
         std::to_string(runs), "--seed", "31", "--ttl", "300ms", "--run-length", "1500ms",
         "--keep", "--work-dir", dir_.File("runs"), "-q"},
        {"REDIS_URL=" + store_.uri(), "WORK_SECONDS=0.2", "FENCING=" + fencing,
         std::string("FENCEKIT_GUARD_LUA=") + GUARD_LUA_DIR + "/fencekit.lua"});
    return testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
  }
  // The lines of every client's log in every run that contain `text`.
  int LogLinesWith(const std::string& text) {
    int n = 0;
    for (const auto& run : std::filesystem::directory_iterator(dir_.File("runs"))) {
      for (int c = 0; c < 3; ++c) {
        std::istringstream log(
            ReadWholeFile(run.path().string() + "/client-" + std::to_string(c) + ".log"));
        for (std::string line; std::getline(log, line);) n += line.find(text) != std::string::npos;
      }
    }
    return n;
  }

  TempDir dir_;
  testing::RedisServer store_;
};

TEST_F(RedisWorkerWithRestartedLocks, WithTheFenceBoundToTheServiceFailsNoRun) {
  Summary s = Run(3, "on");
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.failed_runs, 0) << s.err;
  EXPECT_GT(s.operations, 0);
  EXPECT_GT(LogLinesWith("the fence is bound to lock service "), 0)
      << "the restarted service's leases were never refused";
}

TEST_F(RedisWorkerWithRestartedLocks, CheckingTokensAloneIsCaught) {
  Summary s = Run(4, "token");
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_GT(s.failed_runs, 0) << s.err;
  EXPECT_EQ(LogLinesWith("the fence is bound to lock service "), 0);
}

// --failover-locks: the replica promoted in each run lacks the last grants, so it grants some of
// their tokens again, to other clients. fenced accepts a token equal to the highest it has seen
// (one holder writing twice), so two holders of one token both write: the kit catches the lost
// update even with fencing on. Each failing run's timeline names the grants the replica missed.
// Whether a run's clients take a twice-granted token depends on their timing: 10 runs, as 6 under
// AddressSanitizer's slower processes once caught none.
TEST(PauseWorkerNetworkTest, CurlWorkerThroughARedisFailoverIsCaughtWhereATokenWasGrantedTwice) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  // A lock name per run: the promoted replica's counter may stay below the fence fenced keeps
  // for the lock, and a later run's fresh clients would then see every claim refused.
  const std::string per_run =
      "FENCING_LOCK=\"$FENCING_LOCK/run-$FENCEKIT_RUN\" exec " + Example("counter-curl.sh");
  auto r = testing::RunCommand(
      {testing::FencectlBinary(), "pause-test", "--worker", per_run,
       "--start-redis", "--failover-locks", "--pauses", "0", "--runs", "10", "--seed", "31",
       "--run-length", "1500ms", "--work-dir", dir.File("runs"), "-q"},
      {"FENCED_URL=" + fenced.url(), "WORK_SECONDS=0.05"});
  Summary s = testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
  EXPECT_EQ(s.exit_code, 4) << r.err;
  ASSERT_GT(s.failed_runs, 0) << r.err;
  EXPECT_NE(r.err.find("20 lock-service faults (replication cut, Redis failed over)"),
            std::string::npos)
      << r.err;
  int timelines = 0;
  for (const auto& run : std::filesystem::directory_iterator(dir.File("runs"))) {
    const std::string page = ReadWholeFile(run.path().string() + "/timeline.html");
    if (page.empty()) continue;
    ++timelines;
    EXPECT_FALSE(testing::Search(page, R"(replica promoted: it missed the last (grant|\d+ grants))")
                     .empty())
        << run.path();
    // Some token was granted to two clients.
    std::map<std::string, std::set<int>> clients_of;
    for (int c = 0; c < 3; ++c) {
      const std::string events =
          ReadWholeFile(run.path().string() + "/client-" + std::to_string(c) + ".events.jsonl");
      for (const auto& m : testing::SearchAll(events, R"("event":"grant","token":(\d+))")) {
        clients_of[m[1]].insert(c);
      }
    }
    bool twice = false;
    for (const auto& [token, clients] : clients_of) twice = twice || clients.size() > 1;
    EXPECT_TRUE(twice) << run.path() << ": no token was granted to two clients";
  }
  EXPECT_EQ(timelines, s.failed_runs);
}

// The Python worker's increment is two psql processes, each connecting through its client's
// proxy (libpq's protocol, held as bytes). A longer ttl than curl's, and longer runs: Python and
// psql take up to a second or two to start on a busy machine, and a held write makes a lost
// update only if another client reads before it arrives (within the hold: 0.5-3x the ttl).
// With a 500 ms ttl and 0.3 s of work the control arm caught 4 to 6 runs of 6 here, even beside
// four busy loops, yet none in one CI run; with a 1 s ttl and 1 s of work, 6 of 6 beside them.
class PgThroughProxyFullSoak : public ::testing::Test {
 protected:
  void SetUp() override {
    database_ = testing::NewPostgresDatabase();
    ASSERT_FALSE(database_.empty());
  }
  Summary Run(int runs, bool fencing) {
    const auto at = testing::Search(database_, R"(@([^/]+)/)");
    EXPECT_FALSE(at.empty()) << database_;
    std::vector<std::string> extra = {"--setup",      Example("postgres-setup.sh"),
                                      "--proxy",      "pg=" + (at.empty() ? "" : at[1]),
                                      "--holds",      "6",
                                      "--runs",       std::to_string(runs),
                                      "--seed",       "31",
                                      "--ttl",        "1s",
                                      "--run-length", "8s"};
    return RunWorker(dir_, Example("counter-postgres.py"), extra,
                     testing::PostgresWorkerEnv(database_, "1", fencing,
                                                GUARD_SQL_DIR "/postgresql-guard.sql"));
  }

  TempDir dir_;
  std::string database_;
};

TEST_F(PgThroughProxyFullSoak, WithTheGuardFailsNoRun) {
  Summary s = Run(3, true);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.failed_runs, 0) << s.err;
  EXPECT_GT(s.expired, 0) << s.err;
}

TEST_F(PgThroughProxyFullSoak, WithoutTheTokenCheckIsCaught) {
  Summary s = Run(6, false);
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_GT(s.failed_runs, 0) << s.err;
}

}  // namespace
}  // namespace fencekit
