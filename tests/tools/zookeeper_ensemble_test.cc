// procutil::ZookeeperEnsemble: real ZooKeeper members (Debian's zookeeper) on loopback. The
// checks talk to the members over their client ports with code of their own, not the class's.
#include "fencekit/procutil/zookeeper_ensemble.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>

#include "support/test_support.h"

namespace fencekit::procutil {
namespace {

using namespace std::chrono_literals;
using fencekit::testing::TempDir;
using fencekit::testing::WaitFor;

// A blocking socket connected to 127.0.0.1:port, every call bounded by 2s; -1 when refused.
int Connect(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request`, then reads until the peer closes, `enough` bytes arrived, or a read times
// out.
std::string Exchange(std::uint16_t port, const std::string& request,
                     std::size_t enough = std::string::npos) {
  int fd = Connect(port);
  if (fd < 0) return "";
  std::string reply;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[4096];
    ssize_t n;
    while (reply.size() < enough && (n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
      reply.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return reply;
}

// The member's mode as its `srvr` says: "leader", "follower", "standalone"; "" when it does
// not serve or answer.
std::string Mode(std::uint16_t port) {
  std::string reply = Exchange(port, "srvr");
  std::size_t at = reply.find("\nMode: ");
  if (at == std::string::npos) return "";
  at += 7;
  return reply.substr(at, reply.find('\n', at) - at);
}

int CountMode(const ZookeeperEnsemble& zk, const std::string& mode) {
  int n = 0;
  for (int i = 0; i < zk.size(); ++i) n += Mode(zk.client_port(i)) == mode;
  return n;
}

// Opens a session asking for `requested` ms, as a client's first message does (ZooKeeper's
// ConnectRequest: big-endian, length first); the timeout the member granted, -1 without reply.
int GrantedSessionTimeout(std::uint16_t port, std::uint32_t requested) {
  std::string request;
  auto put32 = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) request.push_back(static_cast<char>(v >> shift));
  };
  put32(45);  // the bytes that follow
  put32(0);   // protocol version
  put32(0);   // last zxid seen (8 bytes)
  put32(0);
  put32(requested);
  put32(0);  // session id (8 bytes): 0, a new session
  put32(0);
  put32(16);  // password: 16 bytes
  request.append(16, '\0');
  request.push_back('\0');  // not read-only
  // The reply: length, protocol version, then the timeout granted.
  std::string reply = Exchange(port, request, 12);
  if (reply.size() < 12) return -1;
  std::uint32_t granted = 0;
  for (int i = 8; i < 12; ++i) granted = granted << 8 | static_cast<unsigned char>(reply[i]);
  return static_cast<int>(granted);
}

// The epoch the member last accepted (version-2/currentEpoch in its data folder); -1 without.
long long CurrentEpoch(const TempDir& dir, int member) {
  std::ifstream in(dir.File("zk" + std::to_string(member) + ".data/version-2/currentEpoch"));
  long long epoch = -1;
  in >> epoch;
  return epoch;
}

TEST(ZookeeperEnsembleTest, StartsThreeMembersOnTheirOwnPortsWithExactlyOneLeader) {
  ZookeeperEnsemble zk;
  Status s = zk.Start();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(zk.size(), 3);
  EXPECT_EQ(CountMode(zk, "leader"), 1);
  EXPECT_EQ(CountMode(zk, "follower"), 2);
  int leader = zk.Leader();
  ASSERT_GE(leader, 0);
  EXPECT_EQ(Mode(zk.client_port(leader)), "leader");
  std::set<std::uint16_t> ports = {zk.client_port(0), zk.client_port(1), zk.client_port(2)};
  EXPECT_EQ(ports.size(), 3u);
  std::string p0 = std::to_string(zk.client_port(0)), p1 = std::to_string(zk.client_port(1)),
              p2 = std::to_string(zk.client_port(2));
  EXPECT_EQ(zk.connect_string(), "127.0.0.1:" + p0 + ",127.0.0.1:" + p1 + ",127.0.0.1:" + p2);
  EXPECT_EQ(zk.connect_string(1), "127.0.0.1:" + p1 + ",127.0.0.1:" + p0 + ",127.0.0.1:" + p2);
}

TEST(ZookeeperEnsembleTest, SessionTimeoutsAreClampedToTwoAndTwentyTicks) {
  ZookeeperEnsemble zk;
  Status s = zk.Start({.tick_ms = 150});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(zk.min_session_timeout(), 300ms);
  EXPECT_EQ(zk.max_session_timeout(), 3000ms);
  for (int i = 0; i < zk.size(); ++i) {
    EXPECT_EQ(GrantedSessionTimeout(zk.client_port(i), 30'000), 3000) << "member " << i;
    EXPECT_EQ(GrantedSessionTimeout(zk.client_port(i), 10), 300) << "member " << i;
    EXPECT_EQ(GrantedSessionTimeout(zk.client_port(i), 1000), 1000) << "member " << i;
  }
}

TEST(ZookeeperEnsembleTest, KillingTheLeaderElectsAnotherAmongTheTwoLeftAndItRejoinsAsFollower) {
  TempDir dir;
  ZookeeperEnsemble zk;
  Status s = zk.Start({.dir = dir.path()});
  ASSERT_TRUE(s.ok()) << s.message();
  int leader = zk.Leader();
  ASSERT_GE(leader, 0);
  zk.Kill(leader);
  EXPECT_EQ(Mode(zk.client_port(leader)), "");
  int next = zk.Leader();
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
  int third = 3 - leader - next;
  EXPECT_TRUE(WaitFor([&] { return Mode(zk.client_port(third)) == "follower"; }));

  s = zk.Restart(leader);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Mode(zk.client_port(leader)), "follower");
  EXPECT_EQ(zk.Leader(), next);
  // It rejoined the ensemble that went on without it: it has taken up the new leader's epoch.
  EXPECT_GE(CurrentEpoch(dir, next), 2);
  EXPECT_EQ(CurrentEpoch(dir, leader), CurrentEpoch(dir, next));
  EXPECT_TRUE(zk.Restart(3).IsInvalidArgument());
}

TEST(ZookeeperEnsembleTest, APausedLeaderIsReplacedAndFollowsOnceResumed) {
  ZookeeperEnsemble zk;
  Status s = zk.Start();
  ASSERT_TRUE(s.ok()) << s.message();
  int leader = zk.Leader();
  ASSERT_GE(leader, 0);
  zk.Pause(leader);
  int next = zk.Leader();  // among the running members only
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
  zk.Resume(leader);
  EXPECT_TRUE(WaitFor([&] { return Mode(zk.client_port(leader)) == "follower"; }, 20s));
  EXPECT_EQ(zk.Leader(), next);
}

TEST(ZookeeperEnsembleTest, RestartOfAMemberWhosePortWasTakenFailsWithItsLogThenSucceedsOnceFree) {
  ZookeeperEnsemble zk;
  ASSERT_TRUE(zk.Start().ok());
  zk.Kill(2);
  // Someone else listens on member 2's client port while it is down.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int on = 1;  // the port has connections in TIME_WAIT, from this test's srvr queries
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(zk.client_port(2));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  Status s = zk.Restart(2);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("ZooKeeper member zk2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Address already in use"), std::string::npos) << s.message();
  ::close(fd);
  // The port is free again (its log still tells of the failed run): the member comes back.
  s = zk.Restart(2);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Mode(zk.client_port(2)), "follower");
}

TEST(ZookeeperEnsembleTest, AWipedEnsembleServesAgainOnTheSamePortsFromEpochOne) {
  TempDir dir;
  ZookeeperEnsemble zk;
  Status s = zk.Start({.dir = dir.path()});
  ASSERT_TRUE(s.ok()) << s.message();
  std::uint16_t ports[3] = {zk.client_port(0), zk.client_port(1), zk.client_port(2)};
  // A second election, so that the survivors' data says epoch 2; one member stays down.
  int leader = zk.Leader();
  ASSERT_GE(leader, 0);
  zk.Kill(leader);
  int next = zk.Leader();
  ASSERT_GE(next, 0);
  ASSERT_GE(CurrentEpoch(dir, next), 2);

  s = zk.Wipe();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(CountMode(zk, "leader"), 1);
  EXPECT_EQ(CountMode(zk, "follower"), 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(zk.client_port(i), ports[i]);
    EXPECT_EQ(CurrentEpoch(dir, i), 1) << "member " << i;
    std::ifstream myid(dir.File("zk" + std::to_string(i) + ".data/myid"));
    int id = 0;
    myid >> id;
    EXPECT_EQ(id, i + 1);
  }
  EXPECT_GE(zk.Leader(), 0);
}

TEST(ZookeeperEnsembleTest, OneMemberRunsStandaloneAndLeads) {
  ZookeeperEnsemble zk;
  Status s = zk.Start({.members = 1});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Mode(zk.client_port(0)), "standalone");
  EXPECT_EQ(zk.Leader(), 0);
  EXPECT_EQ(zk.connect_string(), "127.0.0.1:" + std::to_string(zk.client_port(0)));
  s = zk.Wipe();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Mode(zk.client_port(0)), "standalone");
}

TEST(ZookeeperEnsembleTest, NoMembersAndWipeBeforeStartAreRefused) {
  ZookeeperEnsemble zk;
  EXPECT_TRUE(zk.Wipe().IsInvalidArgument());
  EXPECT_TRUE(zk.Start({.members = 0}).IsInvalidArgument());
  EXPECT_TRUE(zk.Start({.tick_ms = 0}).IsInvalidArgument());
}

TEST(ZookeeperEnsembleTest, AJavaThatCannotRunIsReportedWithWhatToInstall) {
  ZookeeperEnsemble zk;
  Status s = zk.Start({.java = "fencekit-no-such-java"});
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("fencekit-no-such-java"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("install zookeeper"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fencekit::procutil
