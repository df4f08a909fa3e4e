// The etcd backend beyond the shared suite (tests/lockclient/lockclient_test.cc): the line of waiters,
// endpoint failover, the key prefix, and a real 3-member cluster losing its leader and freezing
// a holder. TLS and authentication: tests/lockclient/etcd_tls_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/etcd_server.h"
#include "support/servers/lock_services.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::FencedProcess;
using testing::Soon;
using testing::TempDir;
using testing::WaitFor;

std::unique_ptr<LockClient> Open(const std::string& uri, LockOptions options = {}) {
  return testing::OpenLockClient(uri, options);
}

// The last token issued for `lock`: it moves when a waiter joins the line.
std::int64_t LastIssued(LockClient& client, const std::string& lock) {
  auto info = client.Inspect(lock);
  return info.ok() && info->last_token ? info->last_token->value() : 0;
}

TEST(EtcdLockTest, WaitersAreServedInTheOrderTheyArrivedWithTheirLineRevisionAsToken) {
  EtcdCluster etcd(1);
  auto client = Open(etcd.uri());
  auto holder = client->TryAcquire("job", 30s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  std::mutex mu;
  std::vector<std::pair<std::string, std::int64_t>> order;  // who got it, with which token
  std::vector<std::int64_t> joined;                         // the token each waiter joined with
  std::vector<std::thread> waiters;
  for (std::string name : {"first", "second", "third"}) {
    std::int64_t before = LastIssued(*client, "job");
    waiters.emplace_back([&, name] {
      auto c = Open(etcd.uri());
      auto lease = c->Acquire("job", 30s, 30s);
      ASSERT_TRUE(lease.ok()) << lease.status().ToString();
      {
        std::lock_guard lock(mu);
        order.emplace_back(name, lease->token.value());
      }
      EXPECT_TRUE(c->Release(*lease).ok());
    });
    // The next waiter starts only once this one is in line.
    ASSERT_TRUE(WaitFor([&] { return LastIssued(*client, "job") > before; }));
    joined.push_back(LastIssued(*client, "job"));
  }
  ASSERT_TRUE(client->Release(*holder).ok());
  for (auto& t : waiters) t.join();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].first, "first");
  EXPECT_EQ(order[1].first, "second");
  EXPECT_EQ(order[2].first, "third");
  for (std::size_t i = 0; i < 3; ++i) {
    // The key's create_revision from when it joined, not the revision it was woken at.
    EXPECT_EQ(order[i].second, joined[i]) << order[i].first;
    EXPECT_GT(order[i].second, holder->token.value());
  }
}

TEST(EtcdLockTest, TimedOutWaiterLeavesTheLineAndDoesNotBlockTheNext) {
  EtcdCluster etcd(1);
  auto client = Open(etcd.uri());
  auto holder = client->TryAcquire("job", 30s);
  ASSERT_TRUE(holder.ok());
  auto r = Open(etcd.uri())->Acquire("job", 300ms, 30s);
  ASSERT_TRUE(r.status().IsTimeout()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("\"job\""), std::string::npos);
  ASSERT_TRUE(client->Release(*holder).ok());
  // Had the timed-out waiter stayed in line (its lease lives 30s), this would be busy.
  auto next = client->TryAcquire("job");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, holder->token);
}

TEST(EtcdLockTest, DownEndpointIsSkippedAndAllDownIsUnavailableWithClearError) {
  EtcdCluster etcd(1);
  std::uint16_t dead = testing::FreePort();
  std::string dead_endpoint = "127.0.0.1:" + std::to_string(dead);
  auto client =
      Open("etcd://" + dead_endpoint + ",127.0.0.1:" + std::to_string(etcd.client_port(0)));
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(client->Release(*lease).ok());

  auto down = LockClient::Open("etcd://" + dead_endpoint);
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.status().IsUnavailable()) << down.status().ToString();
  EXPECT_NE(down.status().message().find("no etcd endpoint answered"), std::string::npos)
      << down.status().message();
  EXPECT_NE(down.status().message().find(dead_endpoint), std::string::npos)
      << down.status().message();
}

TEST(EtcdLockTest, KeepAlivesThatCannotReachEtcdLoseTheLeaseWhenItsValidityRunsOut) {
  EtcdCluster etcd(1);
  auto client = Open(etcd.uri(), {.op_timeout = 200ms});
  auto lease = client->TryAcquire("job", 1s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  std::promise<Status> why;
  HeldLock held(
      *client, *lease,
      {.auto_renew = true, .on_lost = [&](const Lease&, const Status& s) { why.set_value(s); }});
  etcd.Pause(0);  // every keep-alive now times out
  auto lost = why.get_future();
  ASSERT_EQ(lost.wait_for(10s), std::future_status::ready) << "on_lost never fired";
  Status s = lost.get();
  etcd.Resume(0);
  EXPECT_TRUE(s.IsNotHeld()) << s.ToString();
  EXPECT_NE(s.message().find("before its validity ran out"), std::string::npos) << s.message();
  EXPECT_TRUE(held.lost());
}

TEST(EtcdLockTest, MalformedUrisAreRefusedWithTheExpectedForm) {
  for (std::string uri : {"etcd://", "etcd://127.0.0.1", "etcd://127.0.0.1:0", "etcd://:2379",
                          "etcd://127.0.0.1:2379,"}) {
    auto c = LockClient::Open(uri);
    ASSERT_FALSE(c.ok()) << uri;
    EXPECT_TRUE(c.status().IsInvalidArgument()) << uri << ": " << c.status().ToString();
    EXPECT_NE(c.status().message().find("etcd://h1:p1"), std::string::npos) << uri;
  }
}

TEST(EtcdLockTest, KeyPrefixKeepsEveryKeyUnderItAndSeparatesTheLocksOfTwoPrefixes) {
  EtcdCluster etcd(1);
  auto team_a = Open(etcd.uri() + "?prefix=team-a/locks/");
  auto team_b = Open(etcd.uri() + "/?prefix=team-b/");
  ASSERT_NE(team_a, nullptr);
  ASSERT_NE(team_b, nullptr);
  EXPECT_EQ(team_a->service(), etcd.uri() + "?prefix=team-a/locks/");
  auto a = team_a->TryAcquire("job", 30s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // The same lock name under another prefix is another lock.
  auto b = team_b->TryAcquire("job", 30s);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(team_a->TryAcquire("job").status().IsBusy());
  EXPECT_EQ(etcd.CountKeys("team-a/locks/lock/"), 1);
  EXPECT_EQ(etcd.CountKeys("team-b/lock/"), 1);
  EXPECT_EQ(etcd.CountKeys("fencekit/"), 0);
  EXPECT_TRUE(team_a->Release(*a).ok());
  EXPECT_TRUE(team_b->Release(*b).ok());
  EXPECT_EQ(etcd.CountKeys("team-a/locks/lock/"), 0);
}

TEST(EtcdClusterTest, LeaderKilledClientCarriesOnThroughAnotherMemberAndTokensKeepIncreasing) {
  EtcdCluster etcd(3);
  int leader = etcd.Leader();
  ASSERT_GE(leader, 0);
  // The leader first in the URI, so the client is talking to it when it dies.
  std::string uri = etcd.uri(leader);
  auto client = Open(uri);
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

  etcd.Kill(leader);
  // The lease survives the election (the new leader restarts every lease's TTL).
  Status extended = client->Extend(*held);
  EXPECT_TRUE(extended.ok()) << extended.ToString();
  EXPECT_NE(etcd.Leader(), leader);
  ASSERT_TRUE(client->Release(*held).ok());
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

TEST(EtcdClusterTest, HungMemberIsSkippedAfterTheRequestTimeout) {
  EtcdCluster etcd(3);
  int leader = etcd.Leader();
  ASSERT_GE(leader, 0);
  int hung = (leader + 1) % 3;
  std::string uri = "etcd://127.0.0.1:" + std::to_string(etcd.client_port(hung));
  for (int m = 0; m < 3; ++m) {
    if (m != hung) uri += ",127.0.0.1:" + std::to_string(etcd.client_port(m));
  }
  etcd.Pause(hung);  // its socket still accepts connections; nothing answers
  auto started = std::chrono::steady_clock::now();
  auto client = Open(uri, {.op_timeout = 300ms});
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client->Release(*lease).ok());
  auto took = std::chrono::steady_clock::now() - started;
  // One op_timeout lost on the hung member, then the others answer at once.
  EXPECT_LT(took, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  etcd.Resume(hung);
}

std::int64_t TokenIn(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<std::string> m = testing::Search(text.str(), "\"token\":([0-9]+)");
  if (m.empty()) return 0;
  return std::stoll(m[1]);
}

TEST(EtcdClusterTest, HolderFrozenPastItsLeaseIsRefusedByTheStoreAfterAnotherAcquires) {
  EtcdCluster etcd(3);
  TempDir dir;
  FencedProcess store(dir.File("store.db"));
  std::string lease_file = dir.File("frozen-lease.json");
  // The holder: acquire with a 1s lease, freeze itself, then (once thawed) write with its token.
  std::string script = "'" + testing::FencectlBinary() + "' acquire --locks '" + etcd.uri() +
                       "' --ttl 1s job > '" + lease_file + "' || exit 10\n" +
                       "kill -STOP $$\n"
                       "token=$(sed -n 's/.*\"token\":\\([0-9]*\\).*/\\1/p' '" +
                       lease_file + "')\n" + "exec '" + testing::FencectlBinary() +
                       "' put --store " + store.url() +
                       " --lock job --token \"$token\" report frozen\n";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the holder exited with " << status;
  std::int64_t frozen_token = TokenIn(lease_file);
  ASSERT_GT(frozen_token, 0);

  // The frozen holder's lease runs out; another client gets the lock and writes.
  auto client = Open(etcd.uri());
  auto lease = client->Acquire("job", 15s, 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_GT(lease->token.value(), frozen_token);
  auto store_client = StoreClient::Open(store.url());
  ASSERT_TRUE(store_client.ok());
  HeldLock held(*client, *lease, {});
  ASSERT_TRUE(FencedPut(**store_client, held, "report", "current").ok());

  // Thawed, the old holder still believes it holds the lock, and writes: the store refuses.
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "fencectl put should exit 3 (refused as stale)";
  auto got = (*store_client)->Get("report");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->value, "current");
  EXPECT_EQ(got->token, lease->token);
}

}  // namespace
}  // namespace fencekit
