// procutil: child processes and servers started for real on loopback.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fencekit/procutil/child_process.h"
#include "fencekit/procutil/delay_proxy.h"
#include "fencekit/procutil/etcd_cluster.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/mariadb_server.h"
#include "fencekit/procutil/redis_server.h"
#include "support/test_support.h"

namespace fencekit::procutil {
namespace {

using fencekit::testing::FencedBinary;
using fencekit::testing::RawConnection;
using fencekit::testing::Request;
using fencekit::testing::TempDir;

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
