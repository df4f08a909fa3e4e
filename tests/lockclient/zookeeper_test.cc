// The ZooKeeper backend beyond the shared suite (tests/lockclient/lockclient_test.cc, which runs
// on one standalone server): a real 3-member ensemble losing its leader, a holder frozen past
// its session, a wiped ensemble, the line of waiters, and what zk:// URIs and ttls it refuses.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/child_process.h"
#include "fencekit/procutil/zookeeper_ensemble.h"
#include "support/matching.h"
#include "support/servers/lock_services.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using procutil::ZookeeperEnsemble;
using testing::TempDir;
using testing::WaitFor;

// An ensemble of `members` on loopback (100ms ticks, sessions up to 60s), failing the test
// when it does not start.
std::unique_ptr<ZookeeperEnsemble> StartEnsemble(const TempDir& dir, int members) {
  auto zk = std::make_unique<ZookeeperEnsemble>();
  Status s = zk->Start(
      {.members = members, .dir = dir.File("zk"), .max_session_timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return zk;
}

std::string Uri(const ZookeeperEnsemble& zk, int first = -1) {
  return "zk://" + zk.connect_string(first);
}

TEST(ZookeeperLockTest, WaitersAreServedInTheOrderTheyArrivedWithTokensThatOnlyGrow) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 1);
  auto client = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(client, nullptr);
  auto holder = client->TryAcquire("job", 30s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  std::mutex mu;
  std::vector<std::pair<std::string, std::int64_t>> order;
  std::vector<std::thread> waiters;
  for (std::string name : {"first", "second", "third"}) {
    const std::int64_t before = client->Inspect("job")->last_token->value();
    waiters.emplace_back([&, name] {
      auto c = testing::OpenLockClient(Uri(*zk));
      auto lease = c->Acquire("job", 30s, 30s);
      ASSERT_TRUE(lease.ok()) << lease.status().ToString();
      {
        std::lock_guard lock(mu);
        order.emplace_back(name, lease->token.value());
      }
      EXPECT_TRUE(c->Release(*lease).ok());
    });
    // The next waiter starts only once this one is in line (its znode is the line's last).
    ASSERT_TRUE(WaitFor([&] { return client->Inspect("job")->last_token->value() > before; }));
  }
  ASSERT_TRUE(client->Release(*holder).ok());
  for (auto& t : waiters) t.join();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].first, "first");
  EXPECT_EQ(order[1].first, "second");
  EXPECT_EQ(order[2].first, "third");
  EXPECT_GT(order[0].second, holder->token.value());
  EXPECT_GT(order[1].second, order[0].second);
  EXPECT_GT(order[2].second, order[1].second);
}

TEST(ZookeeperLockTest, MalformedUrisAreRefusedWithTheExpectedForm) {
  for (std::string uri : {"zk://", "zk://127.0.0.1", "zk://127.0.0.1:0", "zk://:2181",
                          "zk://127.0.0.1:2181,", "zk://127.0.0.1:2181/a//b",
                          "zk://127.0.0.1:2181/a/", "zk://127.0.0.1:2181/a/../b",
                          "zk://127.0.0.1:2181/a b", "zk://127.0.0.1:2181?prefix=x",
                          "zk://user@127.0.0.1:2181", "zk://:pw@127.0.0.1:2181"}) {
    auto c = LockClient::Open(uri);
    ASSERT_FALSE(c.ok()) << uri;
    EXPECT_TRUE(c.status().IsInvalidArgument()) << uri << ": " << c.status().ToString();
    EXPECT_NE(c.status().message().find("use zk://h1:p1"), std::string::npos)
        << c.status().message();
  }
  auto tls = LockClient::Open("zks://127.0.0.1:2181");
  ASSERT_FALSE(tls.ok());
  EXPECT_TRUE(tls.status().IsInvalidArgument());
  EXPECT_NE(tls.status().message().find("built without TLS"), std::string::npos)
      << tls.status().message();
  // A password never shows in a message.
  auto secret = LockClient::Open("zk://app:s3cret@127.0.0.1:0");
  ASSERT_FALSE(secret.ok());
  EXPECT_EQ(secret.status().message().find("s3cret"), std::string::npos)
      << secret.status().message();
}

TEST(ZookeeperLockTest, ATtlAboveTheEnsemblesLongestSessionIsRefusedNotShortened) {
  TempDir dir;
  auto zk = std::make_unique<ZookeeperEnsemble>();
  ASSERT_TRUE(zk->Start({.members = 1, .dir = dir.File("zk")}).ok());  // sessions up to 2s
  auto client = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(client, nullptr);
  auto refused = client->TryAcquire("job", 10s);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("grants sessions of at most 2000ms"),
            std::string::npos)
      << refused.status().message();
  auto fits = client->TryAcquire("job", 2s);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_TRUE(client->Release(*fits).ok());
}

TEST(ZookeeperLockTest, TheServiceIdIsKeptAcrossClientsAndANewOneComesWithAWipedEnsemble) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 1);
  auto client = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job", 5s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(testing::FullMatch(lease->service, "zookeeper:[0-9a-f]{32}")) << lease->service;
  EXPECT_EQ(testing::OpenLockClient(Uri(*zk))->service_id(), lease->service);
  ASSERT_TRUE(client->Release(*lease).ok());

  ASSERT_TRUE(zk->Wipe().ok());
  auto fresh = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(fresh, nullptr);
  EXPECT_NE(fresh->service_id(), lease->service);
  // The first client's session died with the old ensemble; its next grant is the new one's.
  auto again = client->Acquire("job", 10s, 5s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->service, fresh->service_id());
}

// An attempt whose create reached the ensemble but whose answer never came (the member froze
// past the op timeout) leaves a contender that nobody will be granted at the head of the line:
// the client deletes it a ttl after the attempt, so the lock is free again.
TEST(ZookeeperLockTest, AnAttemptWhoseAnswerNeverCameBlocksTheLineNoLongerThanItsTtl) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 1);
  LockOptions options;
  options.op_timeout = 300ms;
  auto client = testing::OpenLockClient(Uri(*zk), options);
  auto other = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(client, nullptr);
  ASSERT_NE(other, nullptr);
  // A first cycle opens the session for leases of 3s, so the frozen attempt has one.
  auto first = client->TryAcquire("job", 3s);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(client->Release(*first).ok());

  zk->Pause(0);
  const auto attempted = std::chrono::steady_clock::now();
  auto lost = client->TryAcquire("job", 3s);
  zk->Resume(0);
  EXPECT_TRUE(lost.status().IsUnavailable()) << lost.status().ToString();
  // The create ran once the member went on.
  ASSERT_TRUE(WaitFor([&] {
    auto info = other->Inspect("job");
    return info.ok() && info->held;
  }));
  auto busy = other->TryAcquire("job", 3s);
  EXPECT_TRUE(busy.status().IsBusy()) << busy.status().ToString();
  ASSERT_TRUE(WaitFor([&] {
    auto info = other->Inspect("job");
    return info.ok() && !info->held;
  }));
  EXPECT_GE(std::chrono::steady_clock::now() - attempted, 3s);
  auto next = other->TryAcquire("job", 3s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, first->token);
}

TEST(ZookeeperLockTest, DigestCredentialsKeepTheLocksToTheirUser) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 1);
  const std::string hosts = zk->connect_string();
  auto app = testing::OpenLockClient("zk://app:s3cret@" + hosts + "/app");
  ASSERT_NE(app, nullptr);
  auto lease = app->TryAcquire("job", 5s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  // Another user may not even read the prefix (CREATOR_ALL ACLs).
  auto eve = LockClient::Open("zk://eve:guess@" + hosts + "/app");
  ASSERT_FALSE(eve.ok());
  EXPECT_TRUE(eve.status().IsPermissionDenied()) << eve.status().ToString();
  EXPECT_EQ(eve.status().message().find("guess"), std::string::npos) << eve.status().message();
  EXPECT_TRUE(app->Release(*lease).ok());
}

TEST(ZookeeperEnsembleLockTest, LeaderKilledTheLeaseLivesOnAndTokensKeepIncreasing) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 3);
  const int leader = zk->Leader();
  ASSERT_GE(leader, 0);
  // The leader first, so the client is connected to it when it dies.
  auto client = testing::OpenLockClient(Uri(*zk, leader));
  ASSERT_NE(client, nullptr);
  std::vector<std::int64_t> tokens;
  for (int i = 0; i < 3; ++i) {
    auto lease = client->Acquire("job", 10s, 5s);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    tokens.push_back(lease->token.value());
    ASSERT_TRUE(client->Release(*lease).ok());
  }
  auto held = client->Acquire("job", 10s, 5s);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  tokens.push_back(held->token.value());

  zk->Kill(leader);
  // The session moves to another member once the ensemble has a new leader.
  Status extended = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor([&] {
    extended = client->Extend(*held);
    return extended.ok() || extended.IsNotHeld();
  }));
  EXPECT_TRUE(extended.ok()) << extended.ToString();
  EXPECT_NE(zk->Leader(), leader);
  // A write may still find the new leader settling (a read went through already): retried as a
  // caller would, and an answer lost on the way makes the retry's "already released".
  Status released = Status::Unavailable("not tried");
  ASSERT_TRUE(WaitFor([&] {
    released = client->Release(*held);
    return !released.IsUnavailable();
  })) << released.ToString();
  EXPECT_TRUE(released.ok() || released.message().find("already released") != std::string::npos)
      << released.ToString();
  for (int i = 0; i < 3; ++i) {
    auto lease = client->Acquire("job", 10s, 5s);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    tokens.push_back(lease->token.value());
    ASSERT_TRUE(client->Release(*lease).ok());
  }
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "grant " << i;
  }
}

// `fencectl run` holds the lock (renewing) while its command runs; frozen, its session expires
// on the ensemble and the next waiter gets the lock with a higher token. A 3 s session: with 1 s,
// a holder starved by a busy machine lost its session before the freeze, and the waiter got
// the lock at once.
TEST(ZookeeperEnsembleLockTest, HolderFrozenPastItsSessionLosesTheLockToAHigherToken) {
  TempDir dir;
  auto zk = StartEnsemble(dir, 3);
  const std::string token_file = dir.File("token");
  procutil::ChildProcess holder;
  ASSERT_TRUE(holder
                  .Start({.argv = {testing::FencectlBinary(), "run", "--locks", Uri(*zk), "--ttl",
                                   "3s", "job", "--", "sh", "-c",
                                   "echo $FENCING_TOKEN > '" + token_file + "'; exec sleep 600"},
                          .output_path = dir.File("holder.log")})
                  .ok());
  std::int64_t frozen = 0;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(token_file);
    return static_cast<bool>(in >> frozen) && frozen > 0;
  })) << holder.OutputTail();
  holder.Signal(SIGSTOP);  // fencectl and its ZooKeeper session go silent

  auto client = testing::OpenLockClient(Uri(*zk));
  ASSERT_NE(client, nullptr);
  auto start = std::chrono::steady_clock::now();
  auto lease = client->Acquire("job", 15s, 10s);
  auto waited = std::chrono::steady_clock::now() - start;
  holder.Signal(SIGCONT);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_GT(lease->token.value(), frozen);
  // Not before the frozen holder's session (its 3 s ttl) could have expired: the ensemble
  // last heard from it at most a third of the ttl before the freeze (the client's ping).
  EXPECT_GE(waited, 1500ms);
  EXPECT_TRUE(client->Release(*lease).ok());
}

}  // namespace
}  // namespace fencekit
