// The example workers of `fencectl pause-test --worker` (pausetest/examples/,
// docs/testing-with-pauses.md "Your own workers") run by the real command, each with its control
// arm: the curl worker against a fenced with fencing (no run fails, a lease expired while in use)
// and against a `fenced --no-fencing` (a run fails: the checker sees the lost update); the
// Python worker on the shared PostgreSQL with the guard, and with FENCING=off (the same worker
// without the token check); the sh worker on a redis-server of its own with the guard's function
// library, and with FENCING=off (plain GET and SET); the Python worker on an etcd of its own
// through the JSON gateway with the guard's transaction, and with FENCING=off (plain put).
// The curl worker's arms run in the default suite; the store workers' (suites *FullSoak, 10 to
// 90 s each) in ./scripts/test --full and CI: in the default run, guard_conformance_test checks
// each store's guard and the curl worker the kit around a worker.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fencekit/common/text.h"
#include "support/servers/etcd_server.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"
#include "support/worker_runs.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::TempDir;

// `path` as one word for `sh -c`.
std::string ShellQuoted(const std::string& path) {
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string Example(const std::string& name) {
  return ShellQuoted(std::string(PAUSE_EXAMPLES_DIR) + "/" + name);
}

using Summary = testing::WorkerRuns;

// `fencectl pause-test --worker WORKER` with a lock service of its own in `dir`, then `extra`;
// `env` is added to the workers' environment (they inherit the command's).
Summary RunWorker(const TempDir& dir, const std::string& worker, std::vector<std::string> extra,
                  const std::vector<std::string>& env) {
  std::vector<std::string> argv = {testing::FencectlBinary(),
                                   "pause-test",
                                   "--worker",
                                   worker,
                                   "--locks",
                                   "sqlite://" + dir.File("locks.db"),
                                   "--work-dir",
                                   dir.File("runs"),
                                   "-q"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = testing::RunCommand(argv, env);
  Summary s = testing::ParseWorkerRuns(r.exit_code, r.out, r.err);
  if (s.runs > 0) {
    EXPECT_GE(s.operations, s.runs) << "every run judged at least one operation";
  }
  return s;
}

// The runs of each arm. The control arms need more runs to catch the lost update reliably: a
// pause must land on a holder between its read and its write, and outlive its lease. The seed
// fixes each run's pause schedule, so the same runs tend to miss. Measured on the 2-core machine
// (2026-12-03, the ASan debug build, a fresh fenced per command): with no work between the
// curl worker's read and its write, its control arm failed 11 runs of 24 (all 6 of a command
// miss about one time in 40, which failed CI once); with 0.1 s of work (kCurlWork), 19 of 24.
// The Python one, with 0.2 s of work between read and write, 7 of 8 (without it, 2 of 12: an
// increment is mostly psql starting, outside the read-modify-write).
const std::vector<std::string> kCurlRuns = {"--runs", "3", "--seed", "31", "--run-length",
                                            "1500ms"};
const std::vector<std::string> kCurlControlRuns = {"--runs", "6", "--seed", "31", "--run-length",
                                                   "1500ms"};
// Both curl arms run the same worker: only fenced's fencing differs.
const std::string kCurlWork = "WORK_SECONDS=0.1";
// A Python worker's increment is two psql processes (a few hundred ms each on a busy machine):
// a longer ttl makes the pauses (0.5-3x the ttl) long enough for another holder to read
// meanwhile, and 0.3 s of work between read and write (WORK_SECONDS) puts more pauses inside
// the read-modify-write. With a 300 ms ttl and 0.2 s the control arm caught 7 runs of 8 on a
// quiet machine but none of 6 under ctest -j2 beside other builds.
const std::vector<std::string> kPostgresRuns = {"--runs", "3", "--seed", "31", "--ttl",
                                                "500ms", "--run-length", "4s"};
const std::vector<std::string> kPostgresControlRuns = {"--runs", "6", "--seed", "31", "--ttl",
                                                       "500ms", "--run-length", "4s"};

// The Redis worker is three redis-cli processes and 0.2 s of work.
const std::vector<std::string> kRedisRuns = {"--runs", "3", "--seed", "31", "--ttl", "300ms",
                                             "--run-length", "3s"};
const std::vector<std::string> kRedisControlRuns = {"--runs", "6", "--seed", "31", "--ttl",
                                                    "300ms", "--run-length", "3s"};

TEST(PauseWorkerExamplesTest, CurlWorkerWithFencingFailsNoRun) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  Summary s = RunWorker(dir, Example("counter-curl.sh"), kCurlRuns,
                        {"FENCED_URL=" + fenced.url(), kCurlWork});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_GT(s.expired, 0) << s.err;  // the pauses really outlived leases
}

// A second command against the same fenced with a lock service of its own (the first one's
// --locks forgotten): fenced, bound to the first service, answers 409 wrong_service to every
// write, the worker records nothing, and the kit says nothing was checked (exit 1), where it
// used to pass.
TEST(PauseWorkerExamplesTest, CurlWorkerWhoseWritesAreAllRefusedAsAnotherServiceIsNotJudged) {
  TempDir dir, other;
  FencedProcess fenced(dir.File("store.db"));
  const std::vector<std::string> env = {"FENCED_URL=" + fenced.url()};
  Summary first = RunWorker(dir, Example("counter-curl.sh"),
                            {"--runs", "1", "--pauses", "0", "--run-length", "500ms"}, env);
  ASSERT_EQ(first.exit_code, 0);
  auto r = testing::RunCommand({testing::FencectlBinary(), "pause-test", "--worker",
                                Example("counter-curl.sh"), "--work-dir", other.File("runs"),
                                "--runs", "2", "--pauses", "0", "--run-length", "500ms", "-q"},
                               env);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("nothing was checked: no worker recorded an operation"), std::string::npos)
      << r.err;
}

TEST(PauseWorkerExamplesTest, CurlWorkerAgainstNoFencingStoreIsCaught) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"), {"--no-fencing"});
  Summary s = RunWorker(dir, Example("counter-curl.sh"), kCurlControlRuns,
                        {"FENCED_URL=" + fenced.url(), kCurlWork});
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_EQ(s.runs, 6);
  EXPECT_GT(s.failed_runs, 0);
}

// The Python worker on the shared PostgreSQL (a FullSoak: CI's --full only, about 15 s).
class PostgresWorkerFullSoak : public ::testing::Test {
 protected:
  void SetUp() override {
    database_ = testing::NewPostgresDatabase();
    ASSERT_FALSE(database_.empty());
  }
  Summary Run(const std::vector<std::string>& runs, bool fencing) {
    std::vector<std::string> extra = {"--setup", Example("postgres-setup.sh")};
    extra.insert(extra.end(), runs.begin(), runs.end());
    return RunWorker(dir_, Example("counter-postgres.py"), extra,
                     testing::PostgresWorkerEnv(database_, "0.3", fencing,
                                                GUARD_SQL_DIR "/postgresql-guard.sql"));
  }

  TempDir dir_;
  std::string database_;
};

TEST_F(PostgresWorkerFullSoak, WithTheGuardFailsNoRun) {
  Summary s = Run(kPostgresRuns, true);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_GT(s.expired, 0) << s.err;
  // The workers did write (on a loaded machine a run may see every increment refused or cut
  // short by the pauses, so not necessarily in every run).
  auto rows = testing::QuerySql(database_, "SELECT count(*) FROM pause_counter WHERE value > 0");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_GE(std::stoi(rows->front()), 1);
}

TEST_F(PostgresWorkerFullSoak, WithoutTheTokenCheckIsCaught) {
  Summary s = Run(kPostgresControlRuns, false);
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_EQ(s.runs, 6);
  EXPECT_GT(s.failed_runs, 0);
}

// A redis-server per test: its fences start empty, like the test's new lock service's tokens.
// A FullSoak (CI's --full only, about 30 s).
class RedisWorkerFullSoak : public ::testing::Test {
 protected:
  Summary Run(const std::vector<std::string>& runs, bool fencing) {
    std::vector<std::string> extra = {"--setup", Example("counter-redis.sh") + " --setup"};
    extra.insert(extra.end(), runs.begin(), runs.end());
    std::vector<std::string> env = {
        "REDIS_URL=" + redis_.uri(), "WORK_SECONDS=0.2",
        std::string("FENCEKIT_GUARD_LUA=") + GUARD_LUA_DIR + "/fencekit.lua"};
    if (!fencing) env.push_back("FENCING=off");
    return RunWorker(dir_, Example("counter-redis.sh"), extra, env);
  }

  TempDir dir_;
  testing::RedisServer redis_;
};

// The etcd worker is one Python process making three gateway requests. On this machine a
// Python process takes 0.8-2.5 s to start (under load), and the holder that takes over after a
// pause only reads once it has started: the pause (0.5-3x the ttl) must outlast the lease and
// that start. Hence a 1 s ttl and 2 s of work between read and write. Measured on the 2-core
// machine (2026-11-26, load 3-7, 3 clients): the control arm failed 15 runs of 30 (5 commands
// of 6 runs: 2 to 4 each); with a 300 ms ttl and 0.2 s of work, 1 run of 24; with 2 clients or
// 14-20 pauses per run, fewer. So it runs 8 (1.5 min).
const std::vector<std::string> kEtcdRuns = {"--runs", "3",  "--seed",       "31",
                                            "--ttl",  "1s", "--run-length", "8s"};
const std::vector<std::string> kEtcdControlRuns = {"--runs", "8",  "--seed",       "31",
                                                   "--ttl",  "1s", "--run-length", "8s"};

TEST_F(RedisWorkerFullSoak, WithTheGuardFailsNoRun) {
  Summary s = Run(kRedisRuns, true);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_GT(s.expired, 0) << s.err;
  // The workers did write: every run's counter is there.
  for (int run = 0; run < 3; ++run) {
    std::string value =
        redis_.Text({"GET", "{pause-test}pause-counter/run-" + std::to_string(run)});
    EXPECT_FALSE(value.empty()) << "run " << run;
  }
}

TEST_F(RedisWorkerFullSoak, WithoutTheTokenCheckIsCaught) {
  Summary s = Run(kRedisControlRuns, false);
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_EQ(s.runs, 6);
  EXPECT_GT(s.failed_runs, 0);
}

// A one-member etcd per test: its fences start empty, like the test's new lock service's tokens.
// A FullSoak (CI's --full only): a Python worker's start-up makes both arms long (about 2 min).
class EtcdWorkerFullSoak : public ::testing::Test {
 protected:
  std::string Endpoint() const {
    return "http://127.0.0.1:" + std::to_string(etcd_.client_port(0));
  }
  // The value `key` holds; empty when absent.
  std::string Value(const std::string& key) {
    testing::RawConnection conn(etcd_.client_port(0));
    conn.Send(testing::Request("POST", "/v3/kv/range", {{"Content-Type", "application/json"}},
                               R"({"key":")" + Base64Encode(key) + R"("})"));
    std::string body = conn.Read().body;
    const std::vector<std::string> m = testing::Search(body, R"re("value":"([^"]*)")re");
    if (m.empty()) return "";
    return Base64Decode(m[1]).value_or("(not base64)");
  }
  Summary Run(const std::vector<std::string>& runs, bool fencing) {
    std::vector<std::string> extra = {"--setup", Example("counter-etcd.py") + " --setup"};
    extra.insert(extra.end(), runs.begin(), runs.end());
    std::vector<std::string> env = {"ETCD_ENDPOINT=" + Endpoint(), "WORK_SECONDS=2"};
    if (!fencing) env.push_back("FENCING=off");
    return RunWorker(dir_, Example("counter-etcd.py"), extra, env);
  }

  TempDir dir_;
  testing::EtcdCluster etcd_;
};

TEST_F(EtcdWorkerFullSoak, WithTheGuardFailsNoRun) {
  Summary s = Run(kEtcdRuns, true);
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.runs, 3);
  EXPECT_EQ(s.failed_runs, 0);
  EXPECT_GT(s.expired, 0) << s.err;
  // The workers did write: every run's counter is there, and the fence holds a 20-digit token.
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(testing::FullMatch(Value("pause-test/pause-counter/run-" + std::to_string(run)),
                                   "[1-9][0-9]*"))
        << "run " << run;
  }
  EXPECT_TRUE(testing::FullMatch(Value("pause-test/fence"), "0{10}[0-9]{10}"));
}

TEST_F(EtcdWorkerFullSoak, WithoutTheTokenCheckIsCaught) {
  Summary s = Run(kEtcdControlRuns, false);
  EXPECT_EQ(s.exit_code, 4) << s.err;
  EXPECT_EQ(s.runs, 8);
  EXPECT_GT(s.failed_runs, 0);
}

}  // namespace
}  // namespace fencekit
