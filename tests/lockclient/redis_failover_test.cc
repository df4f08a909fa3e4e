// Redis failover, stated and tested: a real primary and replica (REPLICAOF), the replication
// link cut before the last grants (so the replica lags, as asynchronous replication lets it),
// the primary SIGKILLed and the replica promoted (REPLICAOF NO ONE) behind the address the
// clients use. What each client can know afterwards, and what the fenced store refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/httpapi/server.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/delay_proxy.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;
using testing::TempDir;
using testing::WaitFor;

std::unique_ptr<procutil::DelayProxy> Proxy(std::uint16_t target) {
  return testing::ValueOrThrow(procutil::DelayProxy::Start(target), "starting the delay proxy");
}

// A lease granted and released at once; its token.
std::int64_t Cycle(LockClient& client) {
  auto lease = client.TryAcquire("job", 10s);
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  if (!lease.ok()) return 0;
  EXPECT_TRUE(client.Release(*lease).ok());
  return lease->token.value();
}

TEST(RedisFailoverTest,
     PromotedReplicaLacksTheLastGrantsTokensRiseForAClientThatSawThemAndTheStoreRefusesTheOlder) {
  TempDir dir;
  // Their files (the replica saves what it receives) go to their own folders.
  RedisServer primary({.extra_args = {"--dir", dir.path(), "--repl-diskless-sync-delay", "0"}});
  std::string replica_dir = dir.File("replica");
  ASSERT_TRUE(std::filesystem::create_directory(replica_dir));
  RedisServer replica({.extra_args = {"--dir", replica_dir}});
  // The replica reaches the primary through a link that can be cut; the clients reach "the
  // primary" through an address that moves to the replica when it is promoted (as a virtual
  // IP, or a name that Sentinel updates, would).
  auto link = Proxy(primary.port());
  auto address = Proxy(primary.port());
  ASSERT_TRUE(link && address);
  ASSERT_EQ(replica.Text({"REPLICAOF", "127.0.0.1", std::to_string(link->port())}), "OK");
  const std::string uri = "redis://127.0.0.1:" + std::to_string(address->port());

  auto client = LockClient::Open(uri);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  LockClient& seen_all = **client;  // sees every grant, before and after the failover
  std::int64_t replicated = 0;
  for (int i = 0; i < 3; ++i) replicated = Cycle(seen_all);
  ASSERT_TRUE(WaitFor([&] {
    return replica.Text({"GET", "fencekit:{job}:token"}) == std::to_string(replicated);
  })) << "the replica never caught up";

  // The link breaks; the replica keeps what it has, and the next grants never reach it.
  link->Retarget(testing::FreePort());
  std::int64_t unreplicated = Cycle(seen_all);
  ASSERT_EQ(unreplicated, replicated + 1);
  auto last = seen_all.TryAcquire("job", 30s);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_EQ(last->token.value(), replicated + 2);
  EXPECT_EQ(replica.Text({"GET", "fencekit:{job}:token"}), std::to_string(replicated));

  // The holder of the last grant writes to the store.
  auto store = FencedStore::Open({.path = dir.File("store.db")});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto server = Server::Start({.port = 0, .threads = 1}, store->get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store_client = StoreClient::Open("http://127.0.0.1:" + std::to_string((*server)->port()));
  ASSERT_TRUE(store_client.ok()) << store_client.status().ToString();
  HeldLock last_holder(seen_all, *last, {});
  ASSERT_TRUE(FencedPut(**store_client, last_holder, "report", "by the last grant").ok());

  // Failover: the primary dies, the replica is promoted, the address moves to it.
  primary.Stop();
  ASSERT_EQ(replica.Text({"REPLICAOF", "NO", "ONE"}), "OK");
  address->Retarget(replica.port());

  // A client that saw none of the old grants cannot know them: the lock looks free although
  // `last` is still valid (two holders), and its token repeats one granted before the failover,
  // below the highest. Same service id (replicated), so the store compares the tokens.
  auto fresh_client = LockClient::Open(uri);
  ASSERT_TRUE(fresh_client.ok()) << fresh_client.status().ToString();
  LockClient& fresh = **fresh_client;
  auto repeated = fresh.TryAcquire("job", 10s);
  ASSERT_TRUE(repeated.ok()) << repeated.status().ToString();
  EXPECT_EQ(repeated->token.value(), unreplicated) << "a token granted before the failover";
  EXPECT_LT(repeated->token, last->token);
  EXPECT_EQ(repeated->service, last->service);
  EXPECT_EQ(fresh.counter_resets_detected(), 0u) << "nothing tells the fresh client";
  Lease before = *last;  // its holder's next renewal is refused: the lease is lost
  Status renewed = seen_all.Extend(before);
  EXPECT_TRUE(renewed.IsNotHeld()) << renewed.ToString();
  {
    HeldLock fresh_holder(fresh, *repeated, {});
    auto r = FencedPut(**store_client, fresh_holder, "report", "by a repeated token");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
    EXPECT_TRUE(fresh_holder.lost());
  }  // releases it
  EXPECT_EQ((*store_client)->Get("report")->value, "by the last grant");

  // The client that saw the old grants remembers the highest token: its next grant is above
  // every token granted before the failover, and raises the new primary's counter with it.
  auto next = seen_all.TryAcquire("job", 10s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, last->token);
  EXPECT_EQ(seen_all.counter_resets_detected(), 1u);
  {
    HeldLock next_holder(seen_all, *next, {});
    EXPECT_TRUE(FencedPut(**store_client, next_holder, "report", "after the failover").ok());
  }
  EXPECT_EQ((*store_client)->Get("report")->value, "after the failover");
  // From then on every client's tokens are above the old ones.
  EXPECT_GT(Cycle(fresh), next->token.value());
}

}  // namespace
}  // namespace fencekit
