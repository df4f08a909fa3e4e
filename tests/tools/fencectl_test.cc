// fencectl as shell scripts use it: the real binary, a real fenced and a real redis-server.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/child_process.h"
#include "support/servers/lock_services.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"
#include "tools/fencectl_json.h"

namespace fencekit {
namespace {

using testing::CommandResult;
using testing::FencectlBinary;
using testing::FencedProcess;
using testing::RedisServer;
using testing::RunCommand;
using testing::Json;
using testing::TempDir;

class FencectlTest : public ::testing::TestWithParam<bool /*redis*/> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      redis_ = std::make_unique<RedisServer>();
      locks_ = redis_->uri();
    } else {
      locks_ = "sqlite://" + dir_.File("locks.db");
    }
  }
  CommandResult Ctl(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), FencectlBinary());
    return RunCommand(args, {"FENCEKIT_LOCKS=" + locks_}, input);
  }
  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::string locks_;
};

TEST_P(FencectlTest, AcquirePrintsLeaseAndBusyExitsTwo) {
  auto r = Ctl({"acquire", "--ttl", "30s", "job"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lease = Json(r.out);
  EXPECT_EQ(lease["lock"].as_string(), "job");
  EXPECT_EQ(lease["owner"].as_string().size(), 32u);
  EXPECT_GE(lease["token"].as_int64(), 1);
  EXPECT_EQ(lease["ttl_ms"].as_int64(), 30000);
  auto busy = Ctl({"acquire", "--wait", "100ms", "job"});
  EXPECT_EQ(busy.exit_code, 2);
  EXPECT_NE(busy.err.find("still held"), std::string::npos) << busy.err;

  auto info = Json(Ctl({"inspect", "job"}).out);
  EXPECT_TRUE(info["held"].as_bool());
  EXPECT_EQ(info["owner"], lease["owner"]);
  std::string owner(lease["owner"].as_string());
  EXPECT_EQ(Ctl({"extend", "--owner", owner, "--ttl", "60s", "job"}).exit_code, 0);
  EXPECT_GT(Json(Ctl({"inspect", "job"}).out)["remaining_ms"].as_int64(), 40000);
  auto wrong = Ctl({"release", "--owner", std::string(32, 'a'), "job"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("not held by owner"), std::string::npos);
  std::string token = std::to_string(lease["token"].as_int64());
  EXPECT_EQ(Ctl({"release", "--owner", owner, "--token", token, "job"}).exit_code, 0);
  EXPECT_FALSE(Json(Ctl({"inspect", "job"}).out)["held"].as_bool());
  // Another process: the service remembers the lock's last release.
  auto again = Ctl({"release", "--owner", owner, "--token", token, "job"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already released"), std::string::npos) << again.err;
  auto next = Json(Ctl({"acquire", "job"}).out);
  EXPECT_GT(next["token"].as_int64(), lease["token"].as_int64());
}

TEST_P(FencectlTest, RunPassesTokenToCommandAndExitsWithItsCode) {
  auto r = Ctl({"run", "--ttl", "5s", "job", "--", "sh", "-c",
                "echo \"$FENCING_LOCK $FENCING_TOKEN $FENCING_OWNER\"; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out.substr(0, 6), "job 1 ");
  EXPECT_EQ(r.out.size(), 6u + 32u + 1u);
  EXPECT_FALSE(Json(Ctl({"inspect", "job"}).out)["held"].as_bool()) << "released after CMD";
  EXPECT_EQ(Ctl({"run", "job"}).exit_code, 64);  // no command: a usage error
}

TEST_P(FencectlTest, RunReportsLostLeaseAndCanTerminateCommand) {
  // The command deletes its own lock behind fencectl's back, then waits to be terminated. The
  // sqlite3 shell waits for the lock file's write lock (a renewal may hold it for a moment on a
  // busy machine) instead of failing at once.
  std::string steal =
      GetParam() ? "redis-cli -p " + std::to_string(redis_->port()) + " DEL 'fencekit:{job}:lock'"
                 : "sqlite3 -cmd '.timeout 10000' " + dir_.File("locks.db") +
                       " \"DELETE FROM locks\"";
  auto r = Ctl({"run", "--ttl", "300ms", "--kill-on-loss", "job", "--", "sh", "-c",
                steal + " >/dev/null; sleep 30"});
  EXPECT_EQ(r.exit_code, 5) << r.err;  // lost while the command ran, whatever it returned
  EXPECT_NE(r.err.find("was lost"), std::string::npos) << r.err;
  // --on-loss warn lets the command finish, and still says the lease was lost.
  auto warn = Ctl({"run", "--ttl", "300ms", "--on-loss", "warn", "job", "--", "sh", "-c",
                   steal + " >/dev/null; sleep 1; exit 0"});
  EXPECT_EQ(warn.exit_code, 5) << warn.err;
  EXPECT_NE(warn.err.find("goes on unprotected"), std::string::npos) << warn.err;
}

TEST_P(FencectlTest, RunWaitsLikeFlockAndAnswersAConflictWithItsOwnCode) {
  auto held = Ctl({"acquire", "--ttl", "30s", "job"});
  ASSERT_EQ(held.exit_code, 0) << held.err;
  auto start = std::chrono::steady_clock::now();
  auto waited = Ctl({"run", "-w", "0.5", "-E", "7", "job", "--", "true"});
  EXPECT_EQ(waited.exit_code, 7) << waited.err;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(Ctl({"run", "-n", "--conflict-exit-code", "9", "job", "--", "true"}).exit_code, 9);
  EXPECT_EQ(Ctl({"run", "-n", "job", "--", "true"}).exit_code, 2);  // flock's default is 1
  EXPECT_EQ(Ctl({"run", "--on-loss", "later", "job", "--", "true"}).exit_code, 64);
  std::string owner(Json(held.out)["owner"].as_string());
  ASSERT_EQ(Ctl({"release", "--owner", owner, "job"}).exit_code, 0);
  EXPECT_EQ(Ctl({"run", "-w", "2", "-E", "7", "job", "--", "true"}).exit_code, 0);
}

TEST_P(FencectlTest, RunStoppedPastItsTtlKillsTheCommandsWholeGroupAndExitsFive) {
  // The command and a grandchild that both ignore SIGTERM: only SIGKILL after the grace stops
  // them, and only if it reaches the whole process group.
  std::string pids = dir_.File("pids");
  procutil::ChildProcess ctl;
  ASSERT_TRUE(ctl.Start({.argv = {FencectlBinary(), "--locks", locks_, "run", "--ttl", "1s",
                                  "--kill-grace", "500ms", "job", "--", "sh", "-c",
                                  "trap '' TERM; sleep 60 & echo $$ $! > " + pids + "; wait"},
                         .output_path = dir_.File("ctl.log")})
                  .ok());
  ASSERT_TRUE(testing::WaitFor([&] {
    std::error_code ec;
    return std::filesystem::file_size(pids, ec) > 0 && !ec;
  }));
  ctl.Signal(SIGSTOP);  // fencectl stops renewing; its command runs on
  // Until the lease has expired, as the lock service sees it.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return !Json(Ctl({"inspect", "job"}).out)["held"].as_bool(); },
      std::chrono::seconds(10)));
  ctl.Signal(SIGCONT);
  int status = ctl.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5) << ctl.OutputTail();
  std::ifstream in(pids);
  pid_t shell = 0, grandchild = 0;
  in >> shell >> grandchild;
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(testing::WaitFor([&] { return ::kill(grandchild, 0) != 0; }))
      << "the command's child outlived the lost lease";
  EXPECT_NE(ctl.OutputTail().find("killing it"), std::string::npos) << ctl.OutputTail();
}

INSTANTIATE_TEST_SUITE_P(Backends, FencectlTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Redis" : "Sqlite"; });

TEST(FencectlCliTest, HelpVersionUsageErrorsAndGlobalOptions) {
  auto help = RunCommand({FencectlBinary(), "release", "--help"});  // --owner, NAME required
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("--owner"), std::string::npos);
  auto version = RunCommand({FencectlBinary(), "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("fencectl ", 0), 0u) << version.out;
  EXPECT_EQ(RunCommand({FencectlBinary(), "acquire"}).exit_code, 64);
  EXPECT_EQ(RunCommand({FencectlBinary(), "acquire", "--bogus", "x"}).exit_code, 64);
  EXPECT_EQ(RunCommand({FencectlBinary(), "frobnicate"}).exit_code, 64);
  EXPECT_EQ(RunCommand({FencectlBinary()}).exit_code, 64);
  // The default lock service is one file per user, whatever the working directory.
  TempDir home;
  auto a = RunCommand({FencectlBinary(), "acquire", "--ttl", "30s", "job"},
                      {"HOME=" + home.path(), "XDG_STATE_HOME=", "FENCEKIT_LOCKS="});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(Json(a.out)["locks"].as_string(),
            "sqlite://" + home.path() + "/.local/state/fencekit/locks.db");
  auto b = RunCommand({FencectlBinary(), "acquire", "job"},
                      {"HOME=" + home.path(), "XDG_STATE_HOME=", "FENCEKIT_LOCKS="});
  EXPECT_EQ(b.exit_code, 2) << "a second holder of one lock: " << b.out;
  // Options before the command.
  auto global = RunCommand({FencectlBinary(), "--locks", "sqlite://" + home.File("g.db"),
                            "acquire", "job"});
  EXPECT_EQ(global.exit_code, 0) << global.err;
}

// Jobs started together (cron, a CI matrix) meet a lock file nobody has created yet: SQLite
// answers "database is locked" at once to all but one of the processes that switch it to WAL
// mode at the same moment. Before the fix about 4% of these processes failed. A soak: 40 rounds
// at full length, 10 in the short arm (120 processes: about 5 would fail without the fix).
TEST(FencectlLockFileSoak, ProcessesOpeningANewLockFileAtOnceAllSucceed) {
  TempDir dir;
  const int kRounds = testing::SoakLength(10, 40);
  constexpr int kProcesses = 12;
  int failed = 0;
  std::string why;
  for (int round = 0; round < kRounds; ++round) {
    std::string uri = "sqlite://" + dir.File("locks" + std::to_string(round) + ".db");
    std::vector<procutil::ChildProcess> ctl(kProcesses);
    for (int i = 0; i < kProcesses; ++i) {
      ASSERT_TRUE(ctl[i]
                      .Start({.argv = {FencectlBinary(), "--locks", uri, "run", "-w", "20", "job",
                                       "--", "true"},
                              .output_path = dir.File("out" + std::to_string(round) + "-" +
                                                      std::to_string(i))})
                      .ok());
    }
    for (auto& c : ctl) {
      int status = c.Wait();
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ++failed;
        why = c.OutputTail();
      }
    }
  }
  EXPECT_EQ(failed, 0) << "of " << kRounds * kProcesses << "; the last: " << why;
}

// `fencectl release --owner ID` (no --token) a second time says "already released" on every
// backend, not that the lease expired; one that did expire is not called released.
class FencectlReleaseTest : public ::testing::TestWithParam<testing::Backend> {
 protected:
  FencectlReleaseTest() : service_(GetParam(), dir_) {}
  CommandResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {FencectlBinary(), "--locks", service_.uri});
    return RunCommand(args);
  }
  TempDir dir_;
  testing::LockService service_;
};

TEST_P(FencectlReleaseTest, ASecondReleaseByOwnerSaysAlreadyReleasedAndAnExpiredOneDoesNot) {
  auto lease = Json(Ctl({"acquire", "--ttl", "30s", "job"}).out);
  ASSERT_TRUE(lease.contains("owner")) << "acquire failed";
  const std::string owner(lease["owner"].as_string());
  auto first = Ctl({"release", "--owner", owner, "job"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (const char* command : {"release", "extend"}) {
    auto again = Ctl({command, "--owner", owner, "job"});
    EXPECT_EQ(again.exit_code, 1) << command;
    EXPECT_NE(again.err.find("already released"), std::string::npos)
        << command << ": " << again.err;
    EXPECT_EQ(again.err.find("expired"), std::string::npos) << command << ": " << again.err;
  }
  // A lease left to expire (1s: etcd's shortest) is not "already released".
  auto expiring = Json(Ctl({"acquire", "--ttl", "1s", "job"}).out);
  ASSERT_TRUE(expiring.contains("owner"));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return !Json(Ctl({"inspect", "job"}).out)["held"].as_bool();
      },
      std::chrono::seconds(20)));
  auto expired = Ctl({"release", "--owner", std::string(expiring["owner"].as_string()), "job"});
  EXPECT_EQ(expired.exit_code, 1);
  EXPECT_EQ(expired.err.find("already released"), std::string::npos) << expired.err;
  EXPECT_NE(expired.err.find("expired"), std::string::npos) << expired.err;
}

INSTANTIATE_TEST_SUITE_P(Backends, FencectlReleaseTest,
                         ::testing::Values(testing::Backend::kSqlite, testing::Backend::kRedis,
                                           testing::Backend::kRedlock, testing::Backend::kEtcd),
                         testing::BackendName);

// Every usage error exits 64 and says what was expected; every duration flag takes one grammar.
TEST(FencectlCliTest, UsageErrorsExit64AndSayWhatWasExpected) {
  TempDir dir;
  const std::string locks = "sqlite://" + dir.File("locks.db");
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), FencectlBinary());
    return RunCommand(args, {"FENCEKIT_LOCKS=" + locks});
  };
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::string duration = R"(duration "abc" is invalid: write seconds (10, 1.5) or a number)";
  const std::vector<Case> cases = {
      {{"acquire", "--ttl", "abc", "job"}, "--ttl: " + duration},
      {{"acquire", "--wait", "abc", "job"}, "--wait: " + duration},
      {{"extend", "--owner", "o", "--ttl", "abc", "job"}, "--ttl: " + duration},
      {{"run", "--ttl", "abc", "job", "--", "true"}, "--ttl: " + duration},
      {{"run", "-w", "abc", "job", "--", "true"}, "--wait: " + duration},
      {{"run", "--kill-grace", "abc", "job", "--", "true"}, "--kill-grace: " + duration},
      {{"pause-test", "--ttl", "abc"}, "--ttl: " + duration},
      {{"pause-test", "--run-length", "abc"}, "--run-length: " + duration},
      {{"run", "-n", "-w", "2", "job", "--", "true"}, "-n (--nonblock) and -w (--wait)"},
      {{"check-token", "--token", "x", "job"}, "--token: fencing token \"x\" is invalid"},
      {{"release", "--owner", "o", "--token", "0", "job"}, "--token: fencing token \"0\""},
      {{"put", "--lock", "L", "--token", "-3", "k", "v"}, "--token: fencing token \"-3\""},
      {{"fence", "--set", "many", "L"}, "--set: fencing token \"many\""},
      {{"acquire", "--locks", "zookeeper://h:1", "job"},
       "is not supported; use sqlite:///path/locks.db"},
      {{"pause-test", "--locks", "zookeeper://h:1"}, "is not supported; use sqlite:///path"},
      {{"get", "--store", "ftp://h/", "k"}, "ftp://h/"},
  };
  for (const auto& c : cases) {
    auto r = ctl(c.args);
    EXPECT_EQ(r.exit_code, 64) << ::testing::PrintToString(c.args) << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos)
        << ::testing::PrintToString(c.args) << ": " << r.err;
  }
  // One grammar: seconds (whole or not), or a number with a unit.
  for (auto [ttl, ms] :
       {std::pair{"10", 10'000}, {"1.5", 1'500}, {"500ms", 500}, {"2m", 120'000}, {"0.5s", 500}}) {
    auto r = ctl({"acquire", "--ttl", ttl, std::string("job-") + ttl});
    ASSERT_EQ(r.exit_code, 0) << ttl << ": " << r.err;
    EXPECT_EQ(Json(r.out)["ttl_ms"].as_int64(), ms) << ttl;
  }
}

// Each command's --help starts with its usage line, positional arguments by name; the main help
// shows each command's defaults as the command's own help does.
TEST(FencectlCliTest, EachCommandsHelpStartsWithItsUsageLineAndAgreesWithTheMainHelp) {
  // Each command, and how its usage line ends: its positional arguments.
  const std::vector<std::pair<std::string, std::string>> usage = {
      {"acquire", " NAME"},        {"release", " NAME"},
      {"extend", " NAME"},         {"inspect", " NAME"},
      {"check-token", " NAME"},    {"run", " NAME -- CMD [ARGS...]"},
      {"put", " KEY [VALUE | -]"}, {"get", " KEY"},
      {"delete", " KEY"},          {"batch", " FILE | -"},
      {"list", " [options]"},      {"fence", " LOCK"},
      {"history", " [options]"},   {"pause-test", " [options]"},
  };
  std::map<std::string, std::string> help;
  for (const auto& [command, ending] : usage) {
    auto r = RunCommand({FencectlBinary(), command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    const std::string line = r.out.substr(0, r.out.find('\n'));
    EXPECT_EQ(line.rfind("Usage: fencectl " + command + " [options]", 0), 0u) << r.out;
    EXPECT_TRUE(line.ends_with(ending)) << command << ": " << line;
    help[command] = r.out;
  }
  // "  fencectl run     [--locks URI] [--ttl 10s] [-w 0 | -n] ...": each [--option value] whose
  // value is not a placeholder (URI, N, ...) is that option's default in the command's help,
  // e.g. "--ttl arg (=10s)" or "-w [ --wait ] arg (=0)".
  const std::string main_help = RunCommand({FencectlBinary(), "--help"}).out;
  const std::string command_line = R"(\n  fencectl ([a-z-]+) +([^\n]*(\n {19}[^\n]*)*))";
  const std::string option = R"(\[(-{1,2}[a-zA-Z-]+) ([a-z0-9]+)[ \]|])";
  int checked = 0;
  for (const auto& c : testing::SearchAll(main_help, command_line)) {
    const std::string command = c[1];
    ASSERT_TRUE(help.count(command)) << "the main help lists " << command;
    const std::string text = c[2];
    for (const auto& o : testing::SearchAll(text, option)) {
      const std::string name = o[1], value = o[2];
      const std::string shown = name.size() == 2 ? name + " [ --" : name + " arg";
      const auto at = help[command].find("  " + shown);
      ASSERT_NE(at, std::string::npos) << command << " has no option " << name;
      const std::string rest = help[command].substr(at, help[command].find('\n', at) - at);
      EXPECT_NE(rest.find("(=" + value + ")"), std::string::npos)
          << "fencectl --help shows " << command << " " << name << " " << value
          << ", its own help: " << rest;
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
}

// LockClient::Open("") in a program and fencectl without --locks use one lock service.
TEST(FencectlCliTest, TheLibrarysDefaultLockServiceIsFencectls) {
  TempDir state;
  ::setenv("XDG_STATE_HOME", state.path().c_str(), 1);
  ::unsetenv("FENCEKIT_LOCKS");
  EXPECT_EQ(DefaultLockUri(), "sqlite://" + state.path() + "/fencekit/locks.db");
  auto client = LockClient::Open("");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto lease = (*client)->TryAcquire("shared", std::chrono::seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto seen = RunCommand({FencectlBinary(), "inspect", "shared"},
                         {"XDG_STATE_HOME=" + state.path(), "FENCEKIT_LOCKS="});
  ASSERT_EQ(seen.exit_code, 0) << seen.err;
  auto info = Json(seen.out);
  EXPECT_TRUE(info["held"].as_bool()) << seen.out;
  EXPECT_EQ(info["owner"].as_string(), lease->owner);
  EXPECT_TRUE((*client)->Release(*lease).ok());
}

}  // namespace
}  // namespace fencekit
