// procutil: child processes and servers started for real on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "fencekit/procutil/child_process.h"
#include "fencekit/procutil/delay_proxy.h"
#include "fencekit/procutil/etcd_cluster.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/mariadb_server.h"
#include "fencekit/procutil/proc_stat.h"
#include "fencekit/procutil/redis_failover.h"
#include "fencekit/procutil/redis_server.h"
#include "support/test_support.h"

namespace fencekit::procutil {
namespace {

using fencekit::testing::FencedBinary;
using fencekit::testing::RawConnection;
using fencekit::testing::Request;
using fencekit::testing::TempDir;

TEST(ProcStatTest, WaitUntilStoppedReturnsOnceEveryThreadOfAStoppedProcessIsStopped) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Four busy threads: the ones a SIGSTOP reaches last.
    for (int i = 0; i < 3; ++i) {
      std::thread([] {
        for (volatile unsigned n = 0;;) n = n + 1;
      }).detach();
    }
    for (volatile unsigned n = 0;;) n = n + 1;
  }
  ASSERT_TRUE(testing::WaitFor([&] { return ThreadStates(child).size() == 4; }));
  // Running: not stopped within the bound.
  EXPECT_FALSE(WaitUntilStopped(child, std::chrono::milliseconds(20)));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  EXPECT_TRUE(WaitUntilStopped(child));
  EXPECT_EQ(ThreadStates(child), "TTTT");
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Gone: nothing left to wait for.
  EXPECT_TRUE(WaitUntilStopped(child, std::chrono::milliseconds(20)));
}

TEST(ProcStatTest, AProcessThatEndsWhileItsStatIsReadReadsAsGone) {
  // Children that end and are reaped as fast as they come, each read while it ends: some end
  // between the open of their /proc/<pid>/stat and its read, which then fails with ESRCH. That
  // reads as gone ('?'), as if the child had ended before the open.
  std::atomic<bool> done{false};
  std::atomic<pid_t> latest{0};
  std::thread spawner([&] {
    while (!done.load()) {
      const pid_t child = fork();
      if (child == 0) _exit(0);
      if (child < 0) continue;
      latest.store(child);
      int status = 0;
      waitpid(child, &status, 0);
    }
  });
  int live = 0, gone = 0;
  // Until each outcome came up 300 times (under a second here), at most 10 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  try {
    while ((live < 300 || gone < 300) && std::chrono::steady_clock::now() < until) {
      const pid_t child = latest.load();
      if (child == 0) continue;
      (ReadProcStat(child).state == '?' ? gone : live) += 1;
      // The listing reads every process's stat the same way.
      for (pid_t listed : ChildrenOf(getpid())) EXPECT_GT(listed, 0);
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "reading /proc threw: " << e.what();
  }
  done = true;
  spawner.join();
  // Both outcomes came up: the reads met children alive (or ending) and children gone.
  EXPECT_GE(live, 300);
  EXPECT_GE(gone, 300);
}

TEST(ChildProcessTest, ProgramThatCannotRunIsReportedByStart) {
  ChildProcess p;
  Status s = p.Start({.argv = {"fencekit-no-such-program"}});
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("cannot run fencekit-no-such-program"), std::string::npos)
      << s.message();
  EXPECT_EQ(p.pid(), -1);
}

TEST(ChildProcessTest, PipesCarryLinesBothWays) {
  ChildProcess cat;
  ASSERT_TRUE(cat.Start({.argv = {"cat"}, .pipe_stdio = true}).ok());
  ASSERT_TRUE(cat.Send("first line"));
  EXPECT_EQ(cat.ReadLine(), "first line");
  ASSERT_TRUE(cat.Send("second"));
  EXPECT_EQ(cat.ReadLine(), "second");
}

TEST(ChildProcessTest, SendToAChildThatHasExitedFailsWithoutKillingTheCaller) {
  ChildProcess done;
  ASSERT_TRUE(done.Start({.argv = {"true"}, .pipe_stdio = true}).ok());
  done.Wait();
  EXPECT_FALSE(done.Send("anyone there?"));  // no SIGPIPE: this test process survives
  EXPECT_EQ(done.ReadLine(), std::nullopt);
}

TEST(ChildProcessTest, OutputGoesToTheFileAndWaitGivesTheExitStatus) {
  TempDir dir;
  ChildProcess sh;
  ASSERT_TRUE(sh.Start({.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"},
                        .output_path = dir.File("log")})
                  .ok());
  int status = sh.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;
  EXPECT_EQ(sh.OutputTail(), "out\nerr\n");
  EXPECT_EQ(sh.pid(), -1);
}

TEST(ChildProcessTest, KillEndsAStoppedProcess) {
  ChildProcess sleeper;
  ASSERT_TRUE(sleeper.Start({.argv = {"sleep", "600"}}).ok());
  sleeper.Signal(SIGSTOP);
  EXPECT_FALSE(sleeper.Exited());
  sleeper.Kill();  // returns only once reaped
  EXPECT_EQ(sleeper.pid(), -1);
}

TEST(ChildProcessTest, WaitForGivesUpOnAProcessThatRunsOnAndReapsOneThatExits) {
  ChildProcess sleeper;
  ASSERT_TRUE(sleeper.Start({.argv = {"sleep", "600"}}).ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(sleeper.WaitFor(std::chrono::milliseconds(50)), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_GT(sleeper.pid(), 0);  // still running, not reaped

  ChildProcess quick;
  ASSERT_TRUE(quick.Start({.argv = {"sh", "-c", "exit 5"}}).ok());
  std::optional<int> status = quick.WaitFor(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 5) << *status;
  EXPECT_EQ(quick.pid(), -1);
}

TEST(ChildProcessTest, AnExitFdBecomesReadableWhenTheChildExitsAndWaitForChildReapsIt) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::pause();  // async-signal-safe only, in a child of a possibly threaded process
    ::_exit(0);
  }
  const int fd = OpenExitFd(pid);
  ASSERT_GE(fd, 0) << "pidfd_open: " << std::strerror(errno);
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // runs: not readable
  EXPECT_EQ(WaitForChild(pid, std::chrono::milliseconds(20)), std::nullopt);
  EXPECT_EQ(::kill(pid, 0), 0);  // neither signalled nor reaped

  ::kill(pid, SIGKILL);
  EXPECT_EQ(::poll(&p, 1, 30'000), 1);
  ::close(fd);
  const std::optional<int> status = WaitForChild(pid, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);  // reaped: no longer a child
}

TEST(ChildProcessTest, WaitForChildOfAProcessThatIsNoChildGivesNoCleanExit) {
  // The parent of this test is no child of it: waitpid fails (ECHILD), as it does for every
  // child when SIGCHLD is ignored. A status of 0 would read as "exit 0".
  EXPECT_EQ(WaitForChild(::getppid(), std::chrono::seconds(5)), -1);
}

TEST(ChildProcessTest, StopKillsAProcessThatIgnoresTheSignalPastTheGrace) {
  ChildProcess stubborn;
  ASSERT_TRUE(
      // `read` waits on the pipe in the shell itself: no child outlives the SIGKILL.
      stubborn.Start({.argv = {"sh", "-c", "trap '' TERM; echo ready; read -r line"},
                      .pipe_stdio = true})
          .ok());
  ASSERT_EQ(stubborn.ReadLine(), "ready");  // the trap is set
  ChildProcess::Stopped stopped = stubborn.Stop(SIGTERM, std::chrono::milliseconds(100));
  EXPECT_TRUE(stopped.killed);
  EXPECT_TRUE(WIFSIGNALED(stopped.status) && WTERMSIG(stopped.status) == SIGKILL);

  ChildProcess polite;
  ASSERT_TRUE(polite.Start({.argv = {"sleep", "600"}}).ok());
  stopped = polite.Stop(SIGTERM, std::chrono::seconds(30));
  EXPECT_FALSE(stopped.killed);
  EXPECT_TRUE(WIFSIGNALED(stopped.status) && WTERMSIG(stopped.status) == SIGTERM);
}

TEST(ChildProcessTest, RunToEndKillsACommandPastItsTimeoutAndQuotesItsOutput) {
  TempDir dir;
  Status s = RunToEnd({"sh", "-c", "echo working; exec sleep 600"}, dir.File("log"),
                      std::chrono::milliseconds(100), "install it", "the slow step");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("the slow step did not finish within 100ms"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("working"), std::string::npos) << s.message();
  EXPECT_TRUE(RunToEnd({"true"}, dir.File("log"), std::chrono::seconds(30), "", "true").ok());
  s = RunToEnd({"sh", "-c", "echo broken; exit 1"}, dir.File("log"), std::chrono::seconds(30), "",
               "the broken step");
  EXPECT_NE(s.message().find("the broken step failed"), std::string::npos) << s.message();
}

// The tests' own runner of commands: a hung command fails its test with its output.
TEST(RunCommandTest, KillsACommandPastItsTimeoutAndSaysSo) {
  auto r = fencekit::testing::RunCommand({"sh", "-c", "echo partial >&2; exec sleep 600"}, {}, "",
                                         std::chrono::seconds(1));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.err.find("partial"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did not exit within 1 s: killed"), std::string::npos) << r.err;
}

TEST(FencedServerTest, PortFileNamesThePortItServesOn) {
  TempDir dir;
  FencedServer fenced;
  Status s = fenced.Start(
      {.binary = FencedBinary(), .db = dir.File("store.db"), .log_path = dir.File("fenced.log")});
  ASSERT_TRUE(s.ok()) << s.message();
  std::ifstream in(dir.File("fenced.log.port"));
  int written = 0;
  ASSERT_TRUE(in >> written);
  EXPECT_EQ(written, fenced.port());
  RawConnection conn(fenced.port());
  conn.Send(Request("GET", "/healthz"));
  EXPECT_EQ(conn.Read().status, 200);
}

TEST(FencedServerTest, RestartServesTheSameDatabaseOnTheSamePort) {
  TempDir dir;
  FencedServer fenced;
  ASSERT_TRUE(fenced
                  .Start({.binary = FencedBinary(),
                          .db = dir.File("store.db"),
                          .log_path = dir.File("fenced.log")})
                  .ok());
  std::uint16_t port = fenced.port();
  {
    RawConnection conn(port);
    conn.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "7"}}, "v"));
    ASSERT_EQ(conn.Read().status, 201);
  }
  Status s = fenced.Restart();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(fenced.port(), port);
  RawConnection conn(port);
  conn.Send(Request("GET", "/v1/objects/k"));
  auto r = conn.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "v");
}

TEST(FencedServerTest, FencedThatCannotStartIsReportedWithItsOutput) {
  TempDir dir;
  FencedServer fenced;
  Status s = fenced.Start({.binary = FencedBinary(),
                           .db = dir.File("store.db"),
                           .log_path = dir.File("fenced.log"),
                           .args = {"--durability", "sometimes"}});
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("--durability \"sometimes\" is invalid"), std::string::npos)
      << s.message();
}

TEST(RedisServerTest, AnotherServerOnThePortIsNotTakenForTheOneStarted) {
  RedisServer first;
  Status s = first.Start();
  ASSERT_TRUE(s.ok()) << s.message();
  TempDir dir;
  RedisServer second;
  // redis-server cannot bind the taken port and exits; `first` answering there is not enough.
  s = second.Start({.port = first.port(), .log_path = dir.File("redis.log")});
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("exited at start"), std::string::npos) << s.message();
}

TEST(RedisServerTest, CommandGivesTheReplyAsTextAndAnErrorReplyAsAnError) {
  RedisServer server;
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Command({"SET", "k", "v"}).value(), "OK");
  EXPECT_EQ(server.Command({"GET", "k"}).value(), "v");
  EXPECT_EQ(server.Command({"INCR", "n"}).value(), "1");
  EXPECT_EQ(server.Command({"GET", "absent"}).value(), "");
  auto wrong = server.Command({"NO-SUCH-COMMAND"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("answered NO-SUCH-COMMAND with ERR"), std::string::npos)
      << wrong.status().message();
  server.Stop();
  EXPECT_TRUE(server.Command({"PING"}).status().IsUnavailable());
}

// The reply's text, or `otherwise` when there was none.
std::string Text(const Result<std::string>& reply, const std::string& otherwise) {
  return reply.ok() ? *reply : otherwise;
}

// GET `key` through the pair's address: the value, "" when absent, "?" when no answer.
std::string ThroughTheAddress(const RedisFailoverPair& pair, const std::string& key) {
  const std::string uri = pair.uri();
  const int port = std::stoi(uri.substr(uri.rfind(':') + 1));
  timeval tv{2, 0};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(
      redisConnectWithTimeout("127.0.0.1", port, tv), redisFree);
  if (c == nullptr || c->err) return "?";
  std::unique_ptr<redisReply, void (*)(void*)> r(
      static_cast<redisReply*>(redisCommand(c.get(), "GET %s", key.c_str())), freeReplyObject);
  if (r == nullptr) return "?";
  return r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
}

TEST(RedisFailoverPairTest, ThePromotedReplicaLacksWhatWasWrittenAfterTheCutAndTheOldPrimaryRejoins) {
  TempDir dir;
  RedisFailoverPair pair;
  Status s = pair.Start(dir.path());
  ASSERT_TRUE(s.ok()) << s.message();
  const std::uint16_t first_primary = pair.primary().port();
  ASSERT_TRUE(pair.primary().Command({"SET", "before", "1"}).ok());
  EXPECT_EQ(ThroughTheAddress(pair, "before"), "1");
  ASSERT_TRUE(fencekit::testing::WaitFor([&] {
    return Text(pair.replica().Command({"GET", "before"}), "") == "1";
  })) << "the replica never received the write";

  pair.CutReplication();
  ASSERT_TRUE(pair.primary().Command({"SET", "after", "1"}).ok());
  s = pair.Failover();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(pair.primary().port(), first_primary);
  EXPECT_EQ(Text(pair.primary().Command({"GET", "before"}), "?"), "1");
  EXPECT_EQ(Text(pair.primary().Command({"GET", "after"}), "?"), "") << "written after the cut";
  EXPECT_EQ(Text(pair.primary().Command({"SET", "promoted", "1"}), ""), "OK")
      << "the promoted replica takes writes";
  EXPECT_EQ(ThroughTheAddress(pair, "promoted"), "1") << "the address moved to it";

  // The old primary comes back empty as the new one's replica, synchronised.
  s = pair.Rejoin();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(pair.replica().port(), first_primary);
  EXPECT_EQ(Text(pair.replica().Command({"GET", "after"}), "?"), "");
  EXPECT_EQ(Text(pair.replica().Command({"GET", "promoted"}), "?"), "1");
}

// A query through the `mariadb` client; its first line of output ("" when none).
std::string MariadbValue(const MariadbServer& server, const std::string& sql, int* exit_code) {
  std::vector<std::string> argv = server.ClientArgv();
  argv.insert(argv.end(), {"--batch", "--skip-column-names", "--connect-timeout=5", "-e", sql});
  auto r = fencekit::testing::RunCommand(argv);
  *exit_code = r.exit_code;
  return r.out.substr(0, r.out.find('\n'));
}

TEST(MariadbServerTest, StartsAnswersStopsCleanlyAndRestartsWithItsData) {
  TempDir dir;
  MariadbServer server;
  Status s = server.Start({.data_dir = dir.File("db")});
  ASSERT_TRUE(s.ok()) << s.ToString();
  int code = -1;
  EXPECT_EQ(MariadbValue(server, "SELECT 6 * 7", &code), "42");
  EXPECT_EQ(code, 0);
  // Durable (innodb_flush_log_at_trx_commit=1 by default): kept across the restart below.
  MariadbValue(server,
               "CREATE DATABASE t; CREATE TABLE t.kept (v INT) ENGINE=InnoDB; "
               "INSERT INTO t.kept VALUES (7)",
               &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(MariadbValue(server, "SELECT @@innodb_flush_log_at_trx_commit", &code), "1");
  const pid_t pid = server.process().pid();
  const std::uint16_t port = server.port();
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(std::filesystem::exists(dir.File("db/mariadbd.sock")));

  server.Stop();
  // The process is gone (reaped: no zombie), its socket and pid file removed, its port closed.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(std::filesystem::exists(dir.File("db/mariadbd.sock")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("db/mariadbd.pid")));
  MariadbValue(server, "SELECT 1", &code);
  EXPECT_NE(code, 0) << "something still answers on port " << port;
  server.Stop();  // a second Stop does nothing

  // The same folder again: no new mariadb-install-db, the row is there.
  s = server.Start({.data_dir = dir.File("db")});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(MariadbValue(server, "SELECT v FROM t.kept", &code), "7");
  EXPECT_EQ(code, 0);
  std::ifstream log(dir.File("db.log"));
  std::string line;
  int installs = 0;
  while (std::getline(log, line)) {
    installs += line.find("Installing MariaDB/MySQL system tables") != std::string::npos;
  }
  EXPECT_EQ(installs, 1);
}

TEST(MariadbServerTest, AnEmptyDataFolderIsRefused) {
  MariadbServer server;
  Status s = server.Start({});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

// A hiredis connection to 127.0.0.1:`port`, closed on destruction.
struct Hiredis {
  explicit Hiredis(std::uint16_t port) {
    timeval tv{5, 0};
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c != nullptr) redisSetTimeout(c, tv);
  }
  ~Hiredis() {
    if (c != nullptr) redisFree(c);
  }
  // Sends `args` without waiting for the reply.
  void Send(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
    int done = 0;
    while (!done && redisBufferWrite(c, &done) == REDIS_OK) {
    }
  }
  // The reply's text (a string or status), "(nil)", or "(error)" when none came.
  std::string Reply() {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) return "(error)";
    auto* r = static_cast<redisReply*>(raw);
    std::string out = r->type == REDIS_REPLY_NIL ? "(nil)" : std::string(r->str, r->len);
    freeReplyObject(r);
    return out;
  }
  std::string Call(const std::vector<std::string>& args) {
    Send(args);
    return Reply();
  }
  redisContext* c = nullptr;
};

TEST(DelayProxyTest, HoldsMatchingRequestsCutsRepliesAndMovesToAnotherServer) {
  RedisServer first, second;
  ASSERT_TRUE(first.Start().ok());
  ASSERT_TRUE(second.Start().ok());
  auto proxy = DelayProxy::Start(first.port());
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  DelayProxy& p = **proxy;
  Hiredis a(p.port()), b(p.port()), direct(first.port());
  ASSERT_EQ(a.Call({"SET", "k", "1"}), "OK");

  // Held: the request waits in the proxy, while another connection's requests pass.
  p.HoldWhen("held-value");
  a.Send({"SET", "k", "held-value"});
  ASSERT_TRUE(p.WaitForHeld(1, std::chrono::seconds(5)));
  EXPECT_EQ(b.Call({"SET", "other", "x"}), "OK");
  EXPECT_EQ(direct.Call({"GET", "k"}), "1");
  p.Release();
  EXPECT_TRUE(p.WaitForAnswers(std::chrono::seconds(5)));
  EXPECT_EQ(direct.Call({"GET", "k"}), "held-value");
  EXPECT_EQ(a.Reply(), "OK");

  // Cut: the request runs, its reply never comes, and the connection closes.
  p.CutReplyWhen("cut-value");
  EXPECT_EQ(a.Call({"SET", "k", "cut-value"}), "(error)");
  EXPECT_TRUE(p.WaitForCuts(1, std::chrono::seconds(5)));
  EXPECT_EQ(direct.Call({"GET", "k"}), "cut-value");
  EXPECT_EQ(b.Call({"GET", "k"}), "cut-value") << "only the matching connection is cut";

  // Retargeted: open connections are closed by the time Retarget returns (a command sent on
  // one right after never reaches the old server), new ones reach the other server.
  p.Retarget(second.port());
  EXPECT_EQ(b.Call({"SET", "k", "after-retarget"}), "(error)");
  EXPECT_EQ(direct.Call({"GET", "k"}), "cut-value");
  Hiredis c(p.port());
  EXPECT_EQ(c.Call({"GET", "k"}), "(nil)");
  EXPECT_EQ(c.Call({"SET", "k", "on-second"}), "OK");
  EXPECT_EQ(direct.Call({"GET", "k"}), "cut-value");
}

// A raw TCP connection to a loopback port, for bytes the proxy must not pass.
struct RawSocket {
  explicit RawSocket(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawSocket() { ::close(fd); }
  void Send(const std::string& bytes) { ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size())); }
  // What arrives within `wait` (until `until` is in it, or the wait is over).
  std::string Read(std::chrono::milliseconds wait, const std::string& until = "") {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || (!until.empty() && got.find(until) != std::string::npos)) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
  }
  int fd = -1;
  bool connected = false;
};

std::string Resp(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// pause-test's --holds: every connection, both ways, until Release(). What is held cannot be
// awaited as an event: the check that nothing passed gives it 300 ms, many round trips.
TEST(DelayProxyTest, HoldAllHoldsEveryConnectionBothWaysUntilRelease) {
  RedisServer server;
  ASSERT_TRUE(server.Start().ok());
  auto proxy = DelayProxy::Start("localhost", server.port());
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  DelayProxy& p = **proxy;
  Hiredis direct(server.port());
  RawSocket writer(p.port()), subscriber(p.port());
  ASSERT_TRUE(writer.connected && subscriber.connected);
  subscriber.Send(Resp({"SUBSCRIBE", "news"}));
  ASSERT_NE(subscriber.Read(std::chrono::seconds(5), ":1\r\n").find(":1\r\n"), std::string::npos);

  p.HoldAll();
  // Client to server: the request does not reach Redis.
  writer.Send(Resp({"SET", "k", "held"}));
  EXPECT_EQ(writer.Read(std::chrono::milliseconds(300)), "");
  EXPECT_EQ(direct.Call({"GET", "k"}), "(nil)");
  // Server to client: a message Redis sent does not reach its subscriber, nor does a
  // connection opened meanwhile pass anything.
  EXPECT_EQ(direct.Call({"PUBLISH", "news", "m1"}), "");  // an integer reply: no text
  EXPECT_EQ(subscriber.Read(std::chrono::milliseconds(300)), "");
  RawSocket late(p.port());
  late.Send(Resp({"PING"}));
  EXPECT_EQ(late.Read(std::chrono::milliseconds(300)), "");

  p.Release();
  EXPECT_EQ(writer.Read(std::chrono::seconds(5), "+OK\r\n"), "+OK\r\n");
  EXPECT_EQ(direct.Call({"GET", "k"}), "held");
  EXPECT_NE(subscriber.Read(std::chrono::seconds(5), "m1").find("m1"), std::string::npos);
  EXPECT_EQ(late.Read(std::chrono::seconds(5), "+PONG\r\n"), "+PONG\r\n");
}

TEST(DelayProxyTest, AHostThatDoesNotResolveIsRefusedSayingSo) {
  auto proxy = DelayProxy::Start("no-such-host.invalid", 80);
  ASSERT_FALSE(proxy.ok());
  EXPECT_NE(proxy.status().message().find("cannot resolve no-such-host.invalid"),
            std::string::npos)
      << proxy.status().ToString();
}

// Puts key "fencekit/restart" (base64 below) = `value_b64` through `port`; the HTTP status.
int EtcdPut(std::uint16_t port, const std::string& value_b64) {
  RawConnection conn(port);
  conn.Send(Request("POST", "/v3/kv/put", {{"Content-Type", "application/json"}},
                    R"({"key":"ZmVuY2VraXQvcmVzdGFydA==","value":")" + value_b64 + R"("})"));
  return conn.Read().status;
}

// A linearizable read of that key through `port` alone: the member must be in the cluster and
// caught up with its leader to answer. The reply body.
std::string EtcdGet(std::uint16_t port) {
  RawConnection conn(port);
  conn.Send(Request("POST", "/v3/kv/range", {{"Content-Type", "application/json"}},
                    R"({"key":"ZmVuY2VraXQvcmVzdGFydA=="})"));
  return conn.Read().body;
}

TEST(EtcdClusterTest, KilledLeaderRestartsWithItsDataRejoinsAndCatchesUp) {
  TempDir dir;
  EtcdCluster etcd;
  Status s = etcd.Start({.members = 3, .dir = dir.path()});
  ASSERT_TRUE(s.ok()) << s.message();
  int leader = etcd.Leader();
  ASSERT_GE(leader, 0);
  int other = (leader + 1) % 3;
  ASSERT_EQ(EtcdPut(etcd.client_port(other), "YmVmb3Jl"), 200);  // "before"
  etcd.Kill(leader);
  int next = etcd.Leader();
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
  // Written while it is down: it can only learn this from the cluster after its restart.
  ASSERT_EQ(EtcdPut(etcd.client_port(next), "d2hpbGUtZG93bg=="), 200);  // "while-down"

  s = etcd.Restart(leader);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(EtcdGet(etcd.client_port(leader)).find("d2hpbGUtZG93bg=="), std::string::npos);
  EXPECT_GE(etcd.Leader(), 0);
  // Its data folder was kept: the restarted process is the same member, not a new one.
  EXPECT_TRUE(std::filesystem::exists(dir.File("m" + std::to_string(leader) + ".data/member")));
  EXPECT_TRUE(etcd.Restart(3).IsInvalidArgument());
}

TEST(EtcdClusterTest, RestartOfAMemberWhosePortWasTakenFailsWithItsLogAndLeavesItDown) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start({.members = 3}).ok());
  etcd.Kill(2);
  // Someone else listens on member 2's client port while it is down.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int on = 1;  // the port has connections in TIME_WAIT, from the member's clients
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(etcd.client_port(2));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  Status s = etcd.Restart(2);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("etcd member m2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("address already in use"), std::string::npos) << s.message();
  ::close(fd);
  // The port is free again: the member comes back.
  s = etcd.Restart(2);
  EXPECT_TRUE(s.ok()) << s.message();
}

}  // namespace
}  // namespace fencekit::procutil
