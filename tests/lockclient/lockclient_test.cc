// One behavioural suite for every lock backend: the embedded SQLite service, and real
// redis-server and etcd processes started by the test. Later backends join by adding a Backend
// value.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "fencekit/fencedstore/store.h"
#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/httpapi/server.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/etcd_server.h"
#include "support/servers/zookeeper_client.h"
#include "support/servers/lock_services.h"
#include "support/ticking_clock.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::RedisServer;
using testing::TempDir;
using testing::WaitFor;

using testing::Backend;
using testing::LockService;

std::string Name(const ::testing::TestParamInfo<Backend>& info) {
  return testing::BackendName(info);
}

class LockBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    LockService service(GetParam(), dir_);
    redis_ = std::move(service.redis);
    nodes_ = std::move(service.nodes);
    etcd_ = std::move(service.etcd);
    zookeeper_ = std::move(service.zookeeper);
    uri_ = service.uri;
    client_ = Open();
  }

  std::unique_ptr<LockClient> Open(LockOptions options = {}) {
    return testing::ValueOrThrow(LockClient::Open(uri_, options), "opening the lock client");
  }

  // Removes the lock's key behind the holder's back.
  void DeleteLockKey(const std::string& lock) {
    if (zookeeper_) {
      // The contenders' znodes under the lock's folder (lock names here need no escaping).
      ASSERT_EQ(testing::ZookeeperDeleteChildren(zookeeper_->connect_string(),
                                                 "/fencekit/locks/" + lock),
                1);
      return;
    }
    if (etcd_) {
      auto info = client_->Inspect(lock);
      ASSERT_TRUE(info.ok() && info->held);
      std::string key =
          "fencekit/lock/" + std::to_string(lock.size()) + ":" + lock + "/" + info->owner;
      ASSERT_EQ(etcd_->DeleteKey(key), 1);
      return;
    }
    if (!nodes_.empty()) {
      int deleted = 0;
      for (auto& n : nodes_) deleted += n->Command({"DEL", "fencekit:{" + lock + "}:lock"}) == 1;
      ASSERT_GE(deleted, 3);
      return;
    }
    if (redis_) {
      ASSERT_EQ(redis_->Command({"DEL", "fencekit:{" + lock + "}:lock"}), 1);
      return;
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.File("locks.db").c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    std::string sql = "DELETE FROM locks WHERE name = CAST('" + lock + "' AS BLOB)";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;  // Redlock
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<procutil::ZookeeperEnsemble> zookeeper_;
  std::string uri_;
  std::unique_ptr<LockClient> client_;
};

TEST_P(LockBackendTest, GrantsLeaseWithOwnerTokenAndValidity) {
  auto before = std::chrono::steady_clock::now();
  auto lease = client_->TryAcquire("job", 5s);
  auto after = std::chrono::steady_clock::now();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->lock, "job");
  EXPECT_EQ(lease->owner.size(), 32u);
  EXPECT_EQ(lease->owner.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_GE(lease->token.value(), 1);
  // valid_until = start + ttl - drift, drift = 1% of ttl + 2ms = 52ms, start within the call.
  EXPECT_LE(lease->valid_until, after + 5s - 52ms);
  EXPECT_GE(lease->valid_until, before + 5s - 52ms);
  auto other = client_->TryAcquire("job", 5s);
  EXPECT_NE(other.status().message().find(client_->service()), std::string::npos);
  EXPECT_TRUE(other.status().IsBusy()) << other.status().ToString();
  EXPECT_TRUE(client_->Release(*lease).ok());
  EXPECT_TRUE(client_->TryAcquire("job").ok());
}

// Every reading of the clock takes 100ms: the request's time counts once, from its start (the
// service's ttl began after it), not again as an elapsed time to subtract.
TEST_P(LockBackendTest, ValidityRunsFromTheRequestsStartCountingItsDurationOnce) {
  testing::TickingClock clock(100ms);
  auto client = Open({.clock = &clock});
  ASSERT_NE(client, nullptr);
  const auto before = clock.Now();  // the request's start is the next reading
  auto lease = client->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->valid_until, before + 100ms + 10s - 102ms);
  const auto extended_at = clock.Now();
  ASSERT_TRUE(client->Extend(*lease, 10s).ok());
  EXPECT_EQ(lease->valid_until, extended_at + 100ms + 10s - 102ms);
}

// A grant whose answer came after its validity had run out (a reading of the clock takes longer
// than the ttl) is refused, and the lock is left free: never a lease born expired.
TEST_P(LockBackendTest, AGrantThatLeavesNoValidityIsRefusedAndReleased) {
  testing::TickingClock clock(6s);
  auto client = Open({.clock = &clock});
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job", 5s);
  ASSERT_FALSE(lease.ok());
  EXPECT_TRUE(lease.status().IsUnavailable()) << lease.status().ToString();
  EXPECT_NE(lease.status().message().find("which leaves no validity of the ttl 5000ms"),
            std::string::npos)
      << lease.status().ToString();
  auto info = client_->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->held);
}

TEST_P(LockBackendTest, OwnersAreUniquePerGrant) {
  auto a = client_->TryAcquire("a");
  auto b = client_->TryAcquire("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->owner, b->owner);
}

TEST_P(LockBackendTest, MutualExclusionAndIncreasingTokensUnderEightThreads) {
  constexpr int kThreads = 8, kRounds = 40;
  std::atomic<int> inside{0}, overlaps{0};
  std::mutex mu;
  std::vector<std::int64_t> tokens;  // in grant order: appended inside the critical section
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto client = Open({.ttl = 10s});
      for (int i = 0; i < kRounds; ++i) {
        auto lease = client->Acquire("counter", 60s);
        ASSERT_TRUE(lease.ok()) << lease.status().ToString();
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard lock(mu);
          tokens.push_back(lease->token.value());
        }
        std::this_thread::yield();
        inside.fetch_sub(1);
        ASSERT_TRUE(client->Release(*lease).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kThreads * kRounds));
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    ASSERT_GT(tokens[i], tokens[i - 1]) << "grant " << i;
  }
}

TEST_P(LockBackendTest, ExpiryFreesDeadHoldersLock) {
  auto dead = client_->TryAcquire("job", 200ms);  // never released: its holder "crashed"
  ASSERT_TRUE(dead.ok());
  auto other = Open();
  EXPECT_TRUE(other->TryAcquire("job").status().IsBusy());
  auto next = other->Acquire("job", 10s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, dead->token);
}

TEST_P(LockBackendTest, ReleaseAndExtendAreOwnerChecked) {
  auto lease = client_->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok());
  Lease forged = *lease;
  forged.owner = std::string(32, 'f');
  Status s = client_->Release(forged);
  EXPECT_TRUE(s.IsNotHeld()) << s.ToString();
  EXPECT_NE(s.message().find("another owner"), std::string::npos) << s.message();
  EXPECT_TRUE(client_->Extend(forged, 10s).IsNotHeld());
  auto info = client_->Inspect("job");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, lease->owner);
  EXPECT_EQ(info->token, lease->token);
  EXPECT_GT(info->remaining, 5s);
  if (GetParam() == Backend::kZookeeper) {
    // The lease is a session of 10s: a longer ttl is refused, not silently shortened.
    Status longer = client_->Extend(*lease, 20s);
    EXPECT_TRUE(longer.IsInvalidArgument()) << longer.ToString();
    EXPECT_NE(longer.message().find("acquire with the longer ttl"), std::string::npos)
        << longer.message();
  } else {
    EXPECT_TRUE(client_->Extend(*lease, 20s).ok());
    EXPECT_GT(client_->Inspect("job")->remaining, 15s);
  }
  ASSERT_TRUE(client_->Release(*lease).ok());
  EXPECT_TRUE(client_->Extend(*lease, 10s).IsNotHeld());
  EXPECT_FALSE(client_->Inspect("job")->held);
  EXPECT_EQ(client_->Inspect("job")->last_token, lease->token);
}

// A second release says the lease was already released: from the client that released it, and
// from any other client or process (the service remembers each lock's last release), which a
// lease that expired never gets called.
TEST_P(LockBackendTest, SecondReleaseSaysTheLeaseWasAlreadyReleased) {
  auto lease = client_->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Release(*lease).ok());
  auto other = Open();  // knows nothing of this lease: only the service can tell
  auto expect_already_released = [&](const char* when, std::vector<LockClient*> clients) {
    for (LockClient* c : clients) {
      const char* who = c == client_.get() ? "the releasing client" : "another client";
      Status again = c->Release(*lease);
      EXPECT_TRUE(again.IsNotHeld()) << when << ", " << who << ": " << again.ToString();
      EXPECT_NE(again.message().find("already released"), std::string::npos)
          << when << ", " << who << ": " << again.message();
      Status extend = c->Extend(*lease, 10s);
      EXPECT_TRUE(extend.IsNotHeld()) << when << ", " << who << ": " << extend.ToString();
      EXPECT_NE(extend.message().find("already released"), std::string::npos)
          << when << ", " << who << ": " << extend.message();
    }
  };
  expect_already_released("free", {client_.get(), other.get()});

  // Still so once another owner holds the lock, whose lease the second release leaves alone.
  // (SQLite keeps the last release in the lock's row, which the next grant replaces: from
  // another client it then says "held by another owner".)
  auto next = other->TryAcquire("job", 10s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  if (GetParam() == Backend::kSqlite) {
    expect_already_released("held by another owner", {client_.get()});
  } else {
    expect_already_released("held by another owner", {client_.get(), other.get()});
  }
  auto info = client_->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, next->owner);
  EXPECT_TRUE(other->Release(*next).ok());

  // A lease that expired was never released, and is not called so.
  auto expired = client_->TryAcquire("other", 100ms);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return !client_->Inspect("other")->held; }));
  Status s = other->Release(*expired);
  EXPECT_TRUE(s.IsNotHeld()) << s.ToString();
  EXPECT_NE(s.message().find("expired"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("already released"), std::string::npos) << s.message();
}

// Released by another client (as `fencectl release` does from another process): the holder's
// own client, which still knows the lease (etcd: its lease id), hears "already released" too.
TEST_P(LockBackendTest, ALeaseReleasedByAnotherClientIsAlreadyReleasedForItsHolder) {
  auto lease = client_->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(Open()->Release(*lease).ok());
  Status extend = client_->Extend(*lease, 10s);
  EXPECT_TRUE(extend.IsNotHeld()) << extend.ToString();
  EXPECT_NE(extend.message().find("already released"), std::string::npos) << extend.message();
  Status release = client_->Release(*lease);
  EXPECT_TRUE(release.IsNotHeld()) << release.ToString();
  EXPECT_NE(release.message().find("already released"), std::string::npos) << release.message();
  EXPECT_FALSE(client_->Inspect("job")->held);
}

TEST_P(LockBackendTest, ExpiredHoldersReleaseDoesNotFreeTheNextHolder) {
  auto old = client_->TryAcquire("job", 100ms);
  ASSERT_TRUE(old.ok());
  auto next = client_->Acquire("job", 10s, 10s);
  ASSERT_TRUE(next.ok());
  Status s = client_->Release(*old);
  EXPECT_TRUE(s.IsNotHeld());
  EXPECT_NE(s.message().find("another owner"), std::string::npos) << s.message();
  EXPECT_EQ(client_->Inspect("job")->owner, next->owner);
}

TEST_P(LockBackendTest, WaiterIsWokenPromptlyByRelease) {
  auto lease = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok());
  std::atomic<bool> tried{false};
  std::promise<std::chrono::steady_clock::time_point> acquired_at;
  std::thread waiter([&] {
    auto client = Open();
    EXPECT_TRUE(client->TryAcquire("job").status().IsBusy());
    tried = true;
    auto got = client->Acquire("job", 30s);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    acquired_at.set_value(std::chrono::steady_clock::now());
  });
  ASSERT_TRUE(WaitFor([&] { return tried.load(); }));
  std::this_thread::sleep_for(50ms);  // let the waiter block (not part of any assertion)
  auto released_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->Release(*lease).ok());
  auto woke = acquired_at.get_future().get() - released_at;
  waiter.join();
  // Without a wake-up it would wait for the 30 s lease to expire.
  EXPECT_LT(woke, 200ms) << "woken after "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(woke).count()
                         << "ms";
}

TEST_P(LockBackendTest, AcquireTimesOutWithClearError) {
  auto lease = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok());
  auto r = Open()->Acquire("job", 100ms);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsTimeout()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("\"job\""), std::string::npos);
}

TEST_P(LockBackendTest, RenewalKeepsLeaseAliveAcrossSeveralTtls) {
  auto lease = client_->TryAcquire("job", 900ms);
  ASSERT_TRUE(lease.ok());
  HeldLock held(*client_, *lease, {.auto_renew = true});
  // 10 renewals at ttl/3 cover more than three TTLs.
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= 10 || held.lost(); }, 30s));
  ASSERT_FALSE(held.lost()) << held.lost_reason().ToString();
  auto info = client_->Inspect("job");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, lease->owner);
  EXPECT_TRUE(Open()->TryAcquire("job").status().IsBusy());
  EXPECT_TRUE(held.Release().ok());
  EXPECT_FALSE(client_->Inspect("job")->held);
}

TEST_P(LockBackendTest, LostLeaseCallbackFiresWhenKeyIsDeleted) {
  auto lease = client_->TryAcquire("job", 300ms);
  ASSERT_TRUE(lease.ok());
  std::promise<Status> why;
  HeldLock held(
      *client_, *lease,
      {.auto_renew = true, .on_lost = [&](const Lease&, const Status& s) { why.set_value(s); }});
  DeleteLockKey("job");
  auto f = why.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "on_lost never fired";
  Status s = f.get();
  EXPECT_TRUE(s.IsNotHeld()) << s.ToString();
  EXPECT_TRUE(held.lost());
  EXPECT_TRUE(held.Release().IsNotHeld());
}

TEST_P(LockBackendTest, StoreRefusalMarksLeaseLost) {
  auto store = FencedStore::Open({.path = dir_.File("store.db")});
  ASSERT_TRUE(store.ok());
  auto server = Server::Start({.port = 0, .threads = 1}, store->get());
  ASSERT_TRUE(server.ok());
  auto store_client = StoreClient::Open("http://127.0.0.1:" + std::to_string((*server)->port()));
  ASSERT_TRUE(store_client.ok());

  auto old_lease = client_->TryAcquire("job", 100ms);
  ASSERT_TRUE(old_lease.ok());
  std::atomic<int> lost_calls{0};
  HeldLock old_holder(*client_, *old_lease,
                      {.on_lost = [&](const Lease&, const Status&) { ++lost_calls; }});
  auto new_lease = client_->Acquire("job", 10s, 10s);  // after the old one expired
  ASSERT_TRUE(new_lease.ok());
  HeldLock new_holder(*client_, *new_lease, {});
  ASSERT_TRUE(FencedPut(**store_client, new_holder, "report", "new").ok());
  auto r = FencedPut(**store_client, old_holder, "report", "old");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
  EXPECT_TRUE(old_holder.lost());
  EXPECT_EQ(lost_calls.load(), 1);
  EXPECT_TRUE(FencedPut(**store_client, old_holder, "report", "old").status().IsNotHeld());
  EXPECT_EQ((*store_client)->Get("report")->value, "new");
}

// Two lock services both grant token 1 for "job"; their tokens are not comparable. The store
// binds the fence to the service of its first write and refuses the other's lease.
TEST_P(LockBackendTest, ALeaseOfAnotherLockServiceIsRefusedAndMarkedLost) {
  auto store = FencedStore::Open({.path = dir_.File("store.db")});
  ASSERT_TRUE(store.ok());
  auto server = Server::Start({.port = 0, .threads = 1}, store->get());
  ASSERT_TRUE(server.ok());
  auto store_client = StoreClient::Open("http://127.0.0.1:" + std::to_string((*server)->port()));
  ASSERT_TRUE(store_client.ok());
  auto other_service = LockClient::Open("sqlite://" + dir_.File("other-locks.db"));
  ASSERT_TRUE(other_service.ok());

  auto ours = client_->TryAcquire("job", 10s);
  ASSERT_TRUE(ours.ok());
  HeldLock holder(*client_, *ours, {});
  ASSERT_TRUE(FencedPut(**store_client, holder, "report", "ours").ok());
  auto theirs = (*other_service)->TryAcquire("job", 10s);
  ASSERT_TRUE(theirs.ok());
  ASSERT_NE(theirs->service, ours->service);
  HeldLock stranger(**other_service, *theirs, {});
  auto r = FencedPut(**store_client, stranger, "report", "theirs");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsWrongService()) << r.status().ToString();
  EXPECT_TRUE(stranger.lost());
  EXPECT_FALSE(holder.lost());
  EXPECT_EQ((*store_client)->Get("report")->value, "ours");
  // The fence shows whose tokens it takes.
  auto fence = (*store_client)->Fence("job");
  ASSERT_TRUE(fence.ok() && fence->has_value()) << fence.status().ToString();
  EXPECT_EQ((*fence)->service, ours->service);
  EXPECT_EQ((*fence)->highest, ours->token);
}

TEST_P(LockBackendTest, RejectsBadArguments) {
  EXPECT_TRUE(client_->TryAcquire("").status().IsInvalidArgument());
  EXPECT_TRUE(client_->TryAcquire("job", 1ms).status().IsInvalidArgument());
  EXPECT_TRUE(client_->TryAcquire(std::string(2000, 'x')).status().IsInvalidArgument());
}

INSTANTIATE_TEST_SUITE_P(Backends, LockBackendTest,
                         ::testing::Values(Backend::kSqlite, Backend::kRedis, Backend::kRedlock,
                                           Backend::kEtcd, Backend::kZookeeper),
                         Name);

// Every network backend says at Open, and at once, that nothing answers at the address.
class UnreachableServiceTest : public ::testing::TestWithParam<Backend> {};

TEST_P(UnreachableServiceTest, OpenIsUnavailableAtOnce) {
  std::string uri;
  switch (GetParam()) {
    case Backend::kRedis:
      uri = "redis://127.0.0.1:" + std::to_string(testing::FreePort());
      break;
    case Backend::kRedlock:
      uri = "redlock://";
      for (int i = 0; i < 3; ++i) {
        uri += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(testing::FreePort());
      }
      break;
    case Backend::kEtcd:
      uri = "etcd://127.0.0.1:" + std::to_string(testing::FreePort());
      break;
    case Backend::kZookeeper:
      uri = "zk://127.0.0.1:" + std::to_string(testing::FreePort());
      break;
    case Backend::kSqlite:
      FAIL() << "not a network service";
  }
  auto start = std::chrono::steady_clock::now();
  auto client = LockClient::Open(uri);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(client.ok()) << uri;
  EXPECT_TRUE(client.status().IsUnavailable()) << client.status().ToString();
  EXPECT_LT(took, 2s);
}

INSTANTIATE_TEST_SUITE_P(NetworkBackends, UnreachableServiceTest,
                         ::testing::Values(Backend::kRedis, Backend::kRedlock, Backend::kEtcd,
                                           Backend::kZookeeper),
                         Name);

}  // namespace
}  // namespace fencekit
