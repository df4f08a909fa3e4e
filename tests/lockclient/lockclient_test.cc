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
#include "fencekit/procutil/delay_proxy.h"
#include "support/servers/etcd_server.h"
#include "support/servers/lock_services.h"
#include "support/ticking_clock.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::RedisServer;
using testing::Soon;
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
    uri_ = service.uri;
    client_ = Open();
  }

  std::unique_ptr<LockClient> Open(LockOptions options = {}) {
    auto c = LockClient::Open(uri_, options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // Removes the lock's key behind the holder's back.
  void DeleteLockKey(const std::string& lock) {
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
  EXPECT_TRUE(client_->Extend(*lease, 20s).ok());
  EXPECT_GT(client_->Inspect("job")->remaining, 15s);
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
                                           Backend::kEtcd),
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
                         ::testing::Values(Backend::kRedis, Backend::kRedlock, Backend::kEtcd),
                         Name);

// --- Backend-specific behaviour ---

TEST(SqliteLockTest, CounterSurvivesReopen) {
  TempDir dir;
  std::string uri = "sqlite://" + dir.File("locks.db");
  std::int64_t last = 0;
  {
    auto client = LockClient::Open(uri).value();
    for (int i = 0; i < 5; ++i) {
      auto l = client->TryAcquire("job");
      ASSERT_TRUE(l.ok());
      last = l->token.value();
      ASSERT_TRUE(client->Release(*l).ok());
    }
  }
  auto client = LockClient::Open(uri).value();
  EXPECT_GT(client->TryAcquire("job")->token.value(), last);
}

TEST(SqliteLockTest, ExpiryFollowsTheInjectedClock) {
  TempDir dir;
  FakeClock clock;
  auto client = LockClient::Open("sqlite://" + dir.File("locks.db"), {.clock = &clock}).value();
  auto lease = client->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->valid_until, clock.Now() + 10s - 102ms);  // drift = 100ms + 2ms
  clock.Advance(9s);
  EXPECT_TRUE(client->TryAcquire("job").status().IsBusy());
  clock.Advance(2s);
  auto next = client->TryAcquire("job");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, lease->token);
}

// The waiters of a SQLite lock database's line: how many, read as another process would.
int WaitersInLine(const std::string& path) {
  sqlite3* db = nullptr;
  int n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM waiters", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

TEST(SqliteLockTest, WaitersAreServedInArrivalOrderAndTryAcquireDoesNotJumpTheLine) {
  TempDir dir;
  std::string path = dir.File("locks.db");
  // Four clients, each its own connection, as four processes would be.
  std::vector<std::unique_ptr<LockClient>> c;
  for (int i = 0; i < 4; ++i) c.push_back(LockClient::Open("sqlite://" + path).value());
  auto held = c[0]->TryAcquire("job", 30s);
  ASSERT_TRUE(held.ok());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i : {1, 2}) {
    waiters.emplace_back([&, i] {
      auto lease = c[i]->Acquire("job", 20s, 30s);
      ASSERT_TRUE(lease.ok()) << lease.status().ToString();
      {
        std::lock_guard l(mu);
        order.push_back(i);
      }
      ASSERT_TRUE(c[i]->Release(*lease).ok());
    });
    ASSERT_TRUE(WaitFor([&] { return WaitersInLine(path) == i; })) << "waiter " << i;
  }
  ASSERT_TRUE(c[0]->Release(*held).ok());
  // Whoever comes now stands behind them: a TryAcquire meanwhile is refused while they wait.
  auto late = c[3]->Acquire("job", 20s, 30s);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(WaitersInLine(path), 0);
  ASSERT_TRUE(c[3]->Release(*late).ok());

  held = c[0]->TryAcquire("job", 30s);
  ASSERT_TRUE(held.ok());
  std::promise<void> checked;
  std::thread waiter([&] {
    auto lease = c[1]->Acquire("job", 20s, 30s);
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    checked.get_future().wait();
    if (lease.ok()) (void)c[1]->Release(*lease);
  });
  ASSERT_TRUE(WaitFor([&] { return WaitersInLine(path) == 1; }));
  // Between the release and the waiter's grant the lock is free, yet not for a newcomer: it is
  // either still free with the waiter first in line, or the waiter's.
  ASSERT_TRUE(c[0]->Release(*held).ok());
  auto jumped = c[2]->TryAcquire("job", 30s);
  checked.set_value();
  waiter.join();
  EXPECT_FALSE(jumped.ok()) << "TryAcquire took the lock before the waiter in line";
  EXPECT_TRUE(jumped.status().IsBusy()) << jumped.status().ToString();
}

// The backend replaces SQLite's commit hook (to wake waiting writers), which also ran SQLite's
// automatic checkpoints: without them the write-ahead log grows with every grant.
TEST(SqliteLockTest, TheWriteAheadLogIsCheckpointedAsGrantsAccumulate) {
  TempDir dir;
  std::string path = dir.File("locks.db");
  auto client = LockClient::Open("sqlite://" + path).value();
  for (int i = 0; i < 1500; ++i) {
    auto lease = client->TryAcquire("job", 30s);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    ASSERT_TRUE(client->Release(*lease).ok());
  }
  // 1,500 grants and releases wrote far more than 1,000 pages; a checkpoint every 1,000 pages
  // lets the log start over, so it stays near 1,000 pages of 4 KiB.
  EXPECT_LT(std::filesystem::file_size(path + "-wal"), 6u << 20);
}

// A caller's deadline is on the clock the client was given: a waiter in a SQLite line gives up
// when that clock passes it, whatever the steady clock says.
TEST(SqliteLockTest, AWaitersDeadlineIsReadOnTheInjectedClock) {
  TempDir dir;
  FakeClock clock;
  clock.Advance(24h * 365 * 10);  // far from the steady clock, whichever way it is read
  std::string path = dir.File("locks.db");
  auto holder = LockClient::Open("sqlite://" + path, {.clock = &clock}).value();
  auto waiter = LockClient::Open("sqlite://" + path, {.clock = &clock}).value();
  auto held = holder->TryAcquire("job", 1h);
  ASSERT_TRUE(held.ok());
  std::promise<Status> outcome;
  auto result = outcome.get_future();
  std::thread waiting(
      [&] { outcome.set_value(waiter->Acquire("job", 1s).status()); });
  ASSERT_TRUE(WaitFor([&] { return WaitersInLine(path) == 1; }));
  if (result.wait_for(std::chrono::milliseconds(200)) == std::future_status::ready) {
    ADD_FAILURE() << "gave up before its clock reached the deadline: " << result.get().ToString();
    waiting.join();
    return;
  }
  clock.Advance(2s);
  bool gave_up = result.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(gave_up) << "still waiting 10 s after its clock passed the deadline";
  if (!gave_up) ASSERT_TRUE(holder->Release(*held).ok());  // lets the waiter end
  waiting.join();
  if (gave_up) EXPECT_TRUE(result.get().IsTimeout());
}

// Nothing sleeps here: the fake clock paces a waiter's wait, a held lock's renewals and the end
// of its validity (HeldLock waits on its client's clock).
TEST(SqliteLockTest, AFakeClockDrivesTheWaitTheRenewalsAndTheExpiryOfAHeldLock) {
  TempDir dir;
  FakeClock clock;
  const std::string path = dir.File("locks.db");
  auto holder = LockClient::Open("sqlite://" + path, {.ttl = 3s, .clock = &clock}).value();
  auto waiter = LockClient::Open("sqlite://" + path, {.clock = &clock}).value();
  auto held = HeldLock::Acquire(*holder, "job", 0ms, {.auto_renew = true});
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const auto first_validity = (*held)->lease().valid_until;

  auto waited = std::async(std::launch::async, [&] { return waiter->Acquire("job", 2s).status(); });
  ASSERT_TRUE(WaitFor([&] { return WaitersInLine(path) == 1; }));
  for (std::uint64_t renewed = 1; renewed <= 2; ++renewed) {
    clock.Advance(1s);  // a third of the ttl: the holder renews
    ASSERT_TRUE(WaitFor([&] { return (*held)->renewals() >= renewed; })) << "renewal " << renewed;
  }
  EXPECT_EQ((*held)->lease().valid_until, first_validity + 2s);
  Status w = waited.get();  // 2 s of fake time have passed, the lock still held
  EXPECT_TRUE(w.IsTimeout()) << w.ToString();
  EXPECT_FALSE((*held)->lost());

  clock.Advance(10s);  // past validity before the next renewal: lost, never renewed late
  ASSERT_TRUE(WaitFor([&] { return (*held)->lost(); }));
  EXPECT_NE((*held)->lost_reason().message().find("before its validity ran out"),
            std::string::npos)
      << (*held)->lost_reason().ToString();
  EXPECT_EQ((*held)->renewals(), 2u);
  auto next = waiter->TryAcquire("job");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, (*held)->lease().token);
}

TEST(SqliteLockTest, ADeadWaiterHoldsUpTheLineNoLongerThanADeadHolderWould) {
  TempDir dir;
  FakeClock clock;
  std::string path = dir.File("locks.db");
  auto holder = LockClient::Open("sqlite://" + path, {.clock = &clock}).value();
  auto waiter = LockClient::Open("sqlite://" + path, {.clock = &clock}).value();
  auto held = holder->TryAcquire("job", 30s);
  ASSERT_TRUE(held.ok());
  // A waiter that gives up leaves the line (its wait is on the clock it was given).
  std::thread gives_up([&] { (void)waiter->Acquire("job", std::chrono::milliseconds(300)); });
  ASSERT_TRUE(WaitFor([&] { return WaitersInLine(path) == 1; }));
  clock.Advance(std::chrono::milliseconds(301));
  gives_up.join();
  EXPECT_EQ(WaitersInLine(path), 0);
  // A killed one cannot: put its row in by hand, a place held for a 30 s ttl.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO waiters(name, owner, ttl_ms, expires_ms) "
                         "SELECT CAST('job' AS BLOB), 'dead', 30000, max(expires_ms) FROM locks",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  // The release hands the lock to the first waiter, dead or not, and nobody jumps the line.
  ASSERT_TRUE(holder->Release(*held).ok());
  auto info = holder->Inspect("job");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, "dead");
  EXPECT_GT(info->token, held->token);
  EXPECT_TRUE(holder->TryAcquire("job").status().IsBusy());
  clock.Advance(31s);  // its lease (30 s, as a live holder's would be) has run out
  auto next = waiter->Acquire("job", 5s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(next->token, info->token);
  EXPECT_EQ(WaitersInLine(path), 0);
}

TEST(LockMetricsTest, CountsWhatTheClientDidAndRendersPrometheusText) {
  TempDir dir;
  FakeClock clock;
  auto client = LockClient::Open("sqlite://" + dir.File("locks.db"), {.clock = &clock}).value();
  auto lease = client->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(client->TryAcquire("job").status().IsBusy());
  EXPECT_TRUE(client->Acquire("job", 0ms).status().IsTimeout());
  ASSERT_TRUE(client->Extend(*lease, 10s).ok());
  {
    HeldLock held(*client, *lease, {});
    held.MarkLost(Status::StaleToken("a store refused the token"));
  }
  Lease forged = *lease;
  forged.owner = std::string(32, 'f');
  EXPECT_FALSE(client->Extend(forged, 10s).ok());
  LockMetrics m = client->metrics();
  EXPECT_EQ(m.acquire_attempts, 3u);
  EXPECT_EQ(m.grants, 1u);
  EXPECT_EQ(m.busy, 1u);  // the TryAcquire; Acquire waits in line
  EXPECT_EQ(m.timeouts, 1u);
  EXPECT_EQ(m.renewals, 1u);
  EXPECT_EQ(m.renewal_failures, 1u);
  EXPECT_EQ(m.lost_marked, 1u);
  EXPECT_EQ(m.wait_count, 1u);
  std::string text = RenderPrometheus(m);
  EXPECT_NE(text.find("# TYPE fencekit_lock_grants_total counter\nfencekit_lock_grants_total 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fencekit_lock_leases_lost_total{cause=\"marked\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("fencekit_lock_acquire_wait_seconds_bucket{le=\"+Inf\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("fencekit_lock_acquire_wait_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(RenderPrometheus(m, "svc_locks").find("svc_locks_busy_total 1\n"), std::string::npos);
}

TEST(SqliteLockTest, RejectsForeignDatabaseAndBadUri) {
  TempDir dir;
  std::string path = dir.File("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_TRUE(LockClient::Open("sqlite://" + path).status().IsInvalidArgument());
  EXPECT_TRUE(LockClient::Open("sqlite://").status().IsInvalidArgument());
  EXPECT_TRUE(LockClient::Open("zookeeper://x").status().IsInvalidArgument());
}

TEST(RedisLockTest, RestartedEmptyTokensStillIncreaseForThisClientAndStoreRefusesOthers) {
  RedisServer redis;
  TempDir dir;
  auto client = LockClient::Open(redis.uri()).value();
  std::int64_t before = 0;
  for (int i = 0; i < 5; ++i) {
    auto l = client->TryAcquire("job");
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    before = l->token.value();
    ASSERT_TRUE(client->Release(*l).ok());
  }
  auto store = FencedStore::Open({.path = dir.File("store.db")}).value();
  ASSERT_TRUE(store->Put("job", FencingToken::FromInt(before).value(), "k", "v5").ok());

  redis.RestartEmpty();  // the counter is gone

  // This client remembers the highest token it saw, so its tokens keep going up.
  auto same = client->TryAcquire("job");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_GT(same->token.value(), before);
  EXPECT_EQ(client->counter_resets_detected(), 1u);
  ASSERT_TRUE(client->Release(*same).ok());

  // A client that never saw the old tokens gets a low one; the store refuses it, loudly.
  redis.RestartEmpty();
  auto fresh = LockClient::Open(redis.uri()).value();
  auto low = fresh->TryAcquire("job");
  ASSERT_TRUE(low.ok());
  EXPECT_LT(low->token.value(), before);
  auto server = Server::Start({.port = 0, .threads = 1}, store.get()).value();
  auto store_client =
      StoreClient::Open("http://127.0.0.1:" + std::to_string(server->port())).value();
  HeldLock held(*fresh, *low, {});
  auto r = FencedPut(*store_client, held, "k", "from the low token");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsStaleToken());
  EXPECT_NE(r.status().message().find("lost its counter"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(held.lost());
  EXPECT_EQ(store->Get("k")->value, "v5");
}

TEST(RedisLockTest, RemembersTheHighestTokensOfTheMostRecentlyUsedLocksOnly) {
  RedisServer redis;
  auto client = LockClient::Open(redis.uri(), {.remembered_locks = 2}).value();
  std::map<std::string, std::int64_t> highest;
  for (std::string lock : {"a", "b", "c", "b", "c"}) {  // "a" is the least recently used
    for (int i = 0; i < 3; ++i) {
      auto l = client->TryAcquire(lock);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      highest[lock] = l->token.value();
      ASSERT_TRUE(client->Release(*l).ok());
    }
  }
  redis.RestartEmpty();  // every counter is gone
  for (std::string lock : {"b", "c"}) {
    auto l = client->TryAcquire(lock);
    ASSERT_TRUE(l.ok());
    EXPECT_GT(l->token.value(), highest[lock]) << lock << " is remembered";
  }
  EXPECT_EQ(client->counter_resets_detected(), 2u);
  auto forgotten = client->TryAcquire("a");
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(forgotten->token.value(), 1) << "\"a\" was forgotten: its counter starts over";
  EXPECT_EQ(client->counter_resets_detected(), 2u);
}

TEST(RedisLockTest, ScriptsReloadAfterFlushAndConnectionsRecoverAfterRestart) {
  RedisServer redis;
  auto client = LockClient::Open(redis.uri()).value();
  ASSERT_TRUE(client->TryAcquire("a").ok());
  ASSERT_EQ(redis.Command({"SCRIPT", "FLUSH"}), -1);  // status reply, not an integer
  ASSERT_TRUE(client->TryAcquire("b").ok());          // NOSCRIPT -> EVAL fallback
  redis.RestartEmpty();                               // pooled connections are now broken
  auto c = client->TryAcquire("c");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST(RedisLockTest, ARenewalThatCannotSucceedLosesTheLeaseAtTheEndOfItsValidity) {
  RedisServer redis;
  // Each request may wait 3 s for an answer: far longer than the lease is valid.
  auto client = LockClient::Open(redis.uri(), {.op_timeout = 3s}).value();
  auto lease = client->TryAcquire("job", 600ms);
  ASSERT_TRUE(lease.ok());
  std::promise<std::chrono::steady_clock::time_point> lost_at;
  HeldLock held(*client, *lease, {.auto_renew = true, .on_lost = [&](const Lease&, const Status&) {
                                    lost_at.set_value(std::chrono::steady_clock::now());
                                  }});
  redis.process().Signal(SIGSTOP);  // the next renewal waits for an answer that never comes
  auto when = lost_at.get_future();
  auto status = when.wait_for(5s);
  redis.process().Signal(SIGCONT);
  ASSERT_EQ(status, std::future_status::ready) << "the lease was never marked lost";
  auto valid_until = held.lease().valid_until;
  auto lost = when.get();
  EXPECT_GE(lost, valid_until);
  EXPECT_LT(lost, valid_until + 200ms) << "marked lost long after its validity ended";
  EXPECT_TRUE(held.lost());
}

// A release whose reply is lost on the way back: the client sends it again over a new
// connection, which finds its own first release done (the lock's last release is this lease's)
// and says released. The lease is released once: a later release says "already released".
class ReleaseReplyLostTest : public ::testing::TestWithParam<Backend> {};

TEST_P(ReleaseReplyLostTest, TheReleaseSentAgainFindsItsOwnFirstOneDoneAndSaysReleased) {
  TempDir dir;
  LockService service(GetParam(), dir);
  std::uint16_t port = service.redis ? service.redis->port() : service.etcd->client_port(0);
  auto proxy = procutil::DelayProxy::Start(port);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  std::string scheme = service.redis ? "redis://" : "etcd://";
  auto client = LockClient::Open(scheme + "127.0.0.1:" + std::to_string((*proxy)->port()));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto lease = (*client)->TryAcquire("job", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  // Redis: the release script's arguments carry the owner; etcd: only the release txn deletes.
  (*proxy)->CutReplyWhen(service.redis ? lease->owner : "request_delete_range");
  Status released = (*client)->Release(*lease);
  ASSERT_TRUE((*proxy)->WaitForCuts(1, 5s)) << "the release was not sent through the proxy";
  EXPECT_TRUE(released.ok()) << released.ToString();
  auto info = (*client)->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->held);
  auto other = LockClient::Open(service.uri);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  Status again = (*other)->Release(*lease);
  EXPECT_TRUE(again.IsNotHeld()) << again.ToString();
  EXPECT_NE(again.message().find("already released"), std::string::npos) << again.message();
}

INSTANTIATE_TEST_SUITE_P(NetworkBackends, ReleaseReplyLostTest,
                         ::testing::Values(Backend::kRedis, Backend::kEtcd), Name);

// An etcd Acquire whose lease expires before its enqueue reaches etcd (the process was paused,
// or the request held up, longer than the ttl): etcd answers "requested lease not found". The
// attempt is retried with a new lease instead of failing with kNotFound.
TEST(EtcdLockTest, AnAttemptWhoseLeaseExpiredBeforeItJoinedTheLineIsRetriedWithANewLease) {
  EtcdCluster etcd(1);
  auto proxy = procutil::DelayProxy::Start(etcd.client_port(0));
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  // Each request may wait long for its answer: longer than the lease lives.
  auto client =
      LockClient::Open("etcd://127.0.0.1:" + std::to_string((*proxy)->port()), {.op_timeout = 20s});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto leases = [&] {  // the leases etcd has, asked directly
    testing::RawConnection conn(etcd.client_port(0));
    conn.Send(testing::Request("POST", "/v3/lease/leases", {}, "{}"));
    std::string body = conn.Read().body;
    int n = 0;
    for (auto at = body.find("\"ID\""); at != std::string::npos; at = body.find("\"ID\"", at + 1)) {
      ++n;
    }
    return n;
  };
  (*proxy)->HoldWhen("/v3/kv/txn");  // the enqueue, sent right after the lease grant
  auto acquired =
      std::async(std::launch::async, [&] { return (*client)->Acquire("job", 30s, 1s); });
  ASSERT_TRUE((*proxy)->WaitForHeld(1, 10s)) << "the enqueue was not sent through the proxy";
  ASSERT_EQ(leases(), 1);
  ASSERT_TRUE(WaitFor([&] { return leases() == 0; }, 10s)) << "the lease never expired";
  (*proxy)->Release();
  auto lease = acquired.get();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto info = (*client)->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, lease->owner);
  EXPECT_EQ(info->token, lease->token);
  EXPECT_TRUE((*client)->Release(*lease).ok());
}

TEST(RedisLockTest, DownServerIsUnavailableWithClearError) {
  auto port = testing::FreePort();
  auto client =
      LockClient::Open("redis://127.0.0.1:" + std::to_string(port), {.op_timeout = 200ms});
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().IsUnavailable()) << client.status().ToString();
  EXPECT_NE(client.status().message().find("redis-server"), std::string::npos);

  RedisServer redis;  // up at open, down later: the acquire says so
  auto later = LockClient::Open(redis.uri(), {.op_timeout = 200ms}).value();
  redis.Stop();
  auto r = later->TryAcquire("job");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnavailable()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("redis-server"), std::string::npos) << r.status().message();
  EXPECT_TRUE(LockClient::Open("redis://127.0.0.1:notaport").status().IsInvalidArgument());
  EXPECT_TRUE(LockClient::Open("redis://127.0.0.1:6379/x").status().IsInvalidArgument());
}

}  // namespace
}  // namespace fencekit
