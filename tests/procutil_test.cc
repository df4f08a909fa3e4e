// procutil: child processes and servers started for real on loopback.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>

#include "fencekit/procutil/child_process.h"
#include "fencekit/procutil/fenced_server.h"
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

}  // namespace
}  // namespace fencekit::procutil
