// Redlock against 5 real redis-server processes on loopback: faults the algorithm must survive,
// and the ones it cannot, where the fenced store still refuses the stale write.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "fencekit/fencedstore/store.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/lock_services.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"
#include "support/ticking_clock.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

class RedlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 5; ++i) nodes_.push_back(std::make_unique<RedisServer>());
  }
  std::string Uri() const { return testing::RedlockUri(nodes_); }
  std::unique_ptr<LockClient> Open(LockOptions options = {}) {
    auto c = LockClient::Open(Uri(), options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

TEST_F(RedlockTest, TokensStrictlyIncreaseAcrossAThousandAcquisitionsBySeveralThreads) {
  constexpr int kThreads = 4, kEach = 250;
  std::mutex mu;
  std::vector<std::int64_t> tokens;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto client = Open();  // separate clients: no shared memory of tokens
      for (int i = 0; i < kEach; ++i) {
        auto lease = client->Acquire("job", 60s);
        ASSERT_TRUE(lease.ok()) << lease.status().ToString();
        {
          std::lock_guard lock(mu);
          tokens.push_back(lease->token.value());
        }
        ASSERT_TRUE(client->Release(*lease).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kThreads * kEach));
  for (std::size_t i = 1; i < tokens.size(); ++i) ASSERT_GT(tokens[i], tokens[i - 1]) << i;
}

TEST_F(RedlockTest, TwoNodesDownStillAcquires) {
  nodes_[0]->Stop();
  nodes_[3]->Stop();
  auto lease = Open()->TryAcquire("job");
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
}

TEST_F(RedlockTest, ThreeNodesDownFailsFastWithPerNodeDetail) {
  auto client = Open({.redlock_node_timeout = 50ms});
  for (int i : {0, 2, 4}) nodes_[i]->Stop();
  auto start = std::chrono::steady_clock::now();
  auto lease = client->TryAcquire("job");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(lease.ok());
  EXPECT_TRUE(lease.status().IsUnavailable()) << lease.status().ToString();
  std::string m = lease.status().message();
  EXPECT_NE(m.find("no majority (3 of 5)"), std::string::npos) << m;
  EXPECT_NE(m.find("failed or timed out"), std::string::npos) << m;
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(nodes_[2]->port())), std::string::npos) << m;
  EXPECT_LT(took, 2s);
  // What it won on the two live nodes was given back.
  for (int i : {1, 3}) EXPECT_EQ(nodes_[i]->Command({"EXISTS", "fencekit:{job}:lock"}), 0);
}

TEST_F(RedlockTest, OpenIsUnavailableWhenAMajorityOfNodesCannotBeReached) {
  for (int i : {0, 2, 4}) nodes_[i]->Stop();
  auto start = std::chrono::steady_clock::now();
  auto client = LockClient::Open(Uri());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().IsUnavailable()) << client.status().ToString();
  std::string m = client.status().message();
  EXPECT_NE(m.find("only 2 of 5"), std::string::npos) << m;
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(nodes_[4]->port())), std::string::npos) << m;

  nodes_[2]->RestartEmpty();  // now 3 of 5: a majority
  EXPECT_TRUE(LockClient::Open(Uri()).ok());
}

TEST_F(RedlockTest, ValidityIsMeasuredOnTheInjectedClock) {
  FakeClock still;
  auto client = Open({.clock = &still});
  auto lease = client->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->valid_until, still.Now() + 10s - 102ms);  // drift = 100ms + 2ms
  ASSERT_TRUE(client->Release(*lease).ok());

  // A majority granted, but the round took longer than the ttl less the drift: no lease, and
  // what was won is given back.
  testing::TickingClock slow(2s);  // every round seems to take 2s
  auto late = Open({.clock = &slow})->TryAcquire("job", 1s);
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(late.status().IsUnavailable()) << late.status().ToString();
  EXPECT_NE(late.status().message().find("which leaves no validity of the ttl 1000ms"),
            std::string::npos)
      << late.status().message();
  for (auto& n : nodes_) EXPECT_EQ(n->Command({"EXISTS", "fencekit:{job}:lock"}), 0);
}

TEST_F(RedlockTest, SequentialModeStopsAtAMajority) {
  auto client = Open({.redlock_sequential = true});
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  int holding = 0;
  for (auto& n : nodes_) holding += n->Command({"EXISTS", "fencekit:{job}:lock"}) == 1;
  EXPECT_EQ(holding, 3);
  EXPECT_TRUE(client->Release(*lease).ok());
}

TEST_F(RedlockTest, NodeRestartedEmptyTokensStillIncrease) {
  std::int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto client = Open();
    auto l = client->TryAcquire("job");
    ASSERT_TRUE(l.ok());
    last = l->token.value();
    ASSERT_TRUE(client->Release(*l).ok());
  }
  nodes_[1]->RestartEmpty();
  for (int i = 0; i < 5; ++i) {
    auto l = Open()->TryAcquire("job");  // a fresh client each time: no memory of tokens
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_GT(l->token.value(), last);
    last = l->token.value();
    ASSERT_TRUE(LockClient::Open(Uri()).value()->Release(*l).ok());
  }
}

// A key removed early on one node stands in for a clock jump there: two clients hold the lock
// at once, and only the store's token check keeps the older holder's write out.
TEST_F(RedlockTest, KeyLostOnOneNodeGivesTwoHoldersAndTheStoreRefusesTheOlder) {
  nodes_[3]->Stop();
  nodes_[4]->Stop();
  auto a = Open()->TryAcquire("job", 30s);  // A holds nodes 0, 1, 2
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  nodes_[3]->RestartEmpty();
  nodes_[4]->RestartEmpty();
  ASSERT_EQ(nodes_[2]->Command({"DEL", "fencekit:{job}:lock"}), 1);  // the "clock jump"
  auto b = Open()->TryAcquire("job", 30s);                           // B wins nodes 2, 3, 4
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(a->owner, b->owner);  // two holders at once
  EXPECT_GT(b->token, a->token);

  testing::TempDir dir;  // a fresh store each run: a fence left by an earlier run would refuse B
  auto store = FencedStore::Open({.path = dir.File("fence.db")}).value();
  ASSERT_TRUE(store->Put("job", b->token, "record", "B").ok());
  auto stale = store->Put("job", a->token, "record", "A");
  EXPECT_TRUE(stale.status().IsStaleToken()) << stale.status().ToString();
  EXPECT_EQ(store->Get("record")->value, "B");
}

TEST_F(RedlockTest, NodeMetricsSayWhichNodesGrantedRefusedOrFailed) {
  nodes_[0]->Stop();
  auto a = Open();
  auto lease = a->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto b = Open();
  auto busy = b->TryAcquire("job");
  ASSERT_TRUE(busy.status().IsBusy()) << busy.status().ToString();

  auto ma = a->node_metrics(), mb = b->node_metrics();
  ASSERT_EQ(ma.size(), 5u);
  EXPECT_EQ(ma[0].address, "127.0.0.1:" + std::to_string(nodes_[0]->port()));
  EXPECT_GE(ma[0].failed, 1u);
  EXPECT_EQ(ma[0].granted, 0u);
  int granted = 0, refused = 0;
  for (int i = 1; i < 5; ++i) {
    granted += ma[i].granted >= 1;
    refused += mb[i].refused >= 1;
    EXPECT_EQ(mb[i].granted, 0u) << i;  // b's failed attempt released nothing it did not win
  }
  EXPECT_GE(granted, 3);
  EXPECT_GE(refused, 3);
  EXPECT_TRUE(a->Release(*lease).ok());
}

TEST_F(RedlockTest, HungNodesTimeOutWithinTheNodeTimeoutAndAreCounted) {
  for (int i : {0, 1, 2}) nodes_[i]->Pause();  // accepting connections, never answering
  auto client = Open({.redlock_node_timeout = 50ms});
  auto start = std::chrono::steady_clock::now();
  auto lease = client->TryAcquire("job");
  auto took = std::chrono::steady_clock::now() - start;
  for (int i : {0, 1, 2}) nodes_[i]->Resume();
  ASSERT_FALSE(lease.ok());
  EXPECT_TRUE(lease.status().IsUnavailable()) << lease.status().ToString();
  EXPECT_NE(lease.status().message().find("no reply within 50ms"), std::string::npos)
      << lease.status().ToString();
  EXPECT_LT(took, 2s);
  auto m = client->node_metrics();
  for (int i : {0, 1, 2}) EXPECT_GE(m[i].timed_out, 1u) << i;
  for (int i : {3, 4}) EXPECT_EQ(m[i].timed_out, 0u) << i;
}

// With the nodes' counters in step, the granting majority already knows the token: no second
// round. When they are not, the write-back is one more request to each other granting node
// (which answered a moment ago), all at once.
TEST_F(RedlockTest, WriteBackCostsAtMostOneExtraRequestPerNode) {
  auto client = Open();
  auto requests = [&] {
    std::vector<std::uint64_t> r;
    for (const auto& m : client->node_metrics()) r.push_back(m.requests);
    return r;
  };
  auto warm = client->TryAcquire("job");  // counters: 1 on every node
  ASSERT_TRUE(warm.ok());
  ASSERT_TRUE(client->Release(*warm).ok());

  auto before = requests();
  auto in_step = client->TryAcquire("job");
  ASSERT_TRUE(in_step.ok()) << in_step.status().ToString();
  auto after = requests();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(after[i] - before[i], 1u) << "node " << i;
  ASSERT_TRUE(client->Release(*in_step).ok());

  // Out of step: every node's counter differs, so whichever majority answers first, exactly one
  // of its nodes holds the maximum and the other granting nodes whose answers were awaited (at
  // least two) are asked to raise theirs.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(nodes_[i]->Command({"SET", "fencekit:{job}:token", std::to_string(1000 + 10 * i)}),
              -1);  // "OK"
  }
  before = requests();
  auto ahead = client->TryAcquire("job");
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  after = requests();
  // The maximum over any 3 of the counters 1001, 1011, ..., 1041 is one of the 3 largest.
  const std::int64_t token = ahead->token.value();
  EXPECT_TRUE(token == 1021 || token == 1031 || token == 1041) << token;
  int once = 0, twice = 0;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t sent = after[i] - before[i];
    once += sent == 1;
    twice += sent == 2;
    if (1000 + 10 * i + 1 == token) {
      EXPECT_EQ(sent, 1u) << "node " << i;  // it knows the token
    }
  }
  EXPECT_EQ(once + twice, 5);  // never more than one write-back request per node
  EXPECT_GE(twice, 2);         // one to each other awaited granting node, in one round
  // The granting majority now holds the lease's token in its lock key: the token checks.
  auto check = client->CheckToken("job", ahead->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_TRUE(check->current);
  EXPECT_EQ(check->service, ahead->service);
  int know = 0;
  for (auto& n : nodes_) {
    know += n->Command({"EVAL", "return tonumber(redis.call('get', KEYS[1]))", "1",
                        "fencekit:{job}:token"}) >= token;
  }
  EXPECT_GE(know, 3);
  ASSERT_TRUE(client->Release(*ahead).ok());
}

}  // namespace
}  // namespace fencekit
