// Each lock backend's own behaviour, beyond the suite every backend passes
// (lockclient_test.cc): the SQLite service's line of waiters and fake clocks, Redis's lost
// counters and scripts, etcd's line, a lost release reply.
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
  if (!gave_up) {
    ASSERT_TRUE(holder->Release(*held).ok());  // lets the waiter end
  }
  waiting.join();
  if (gave_up) {
    EXPECT_TRUE(result.get().IsTimeout());
  }
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
  // After a failed ASSERT the waiter must still end (on the fake clock), or `waited`'s
  // destructor blocks until ctest kills the test.
  struct EndTheWait {
    FakeClock& clock;
    ~EndTheWait() { clock.Advance(1h); }
  } end_the_wait{clock};
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

// A renewal is due a third of the ttl after the validity started, however late the renewing
// thread gets to run: a held lock given a lease already past that point renews at once, while
// the fake clock stands still.
TEST(SqliteLockTest, AHeldLockRenewsAThirdOfTheTtlAfterTheGrantNotAfterItsThreadStarted) {
  TempDir dir;
  FakeClock clock;
  auto client =
      LockClient::Open("sqlite://" + dir.File("locks.db"), {.ttl = 3s, .clock = &clock}).value();
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  clock.Advance(1500ms);  // past a third of the ttl, well inside validity
  HeldLock held(*client, *lease, {.auto_renew = true});
  EXPECT_TRUE(WaitFor([&] { return held.renewals() >= 1; }))
      << "no renewal though a third of the ttl had passed since the grant";
  EXPECT_EQ(held.lease().valid_until, lease->valid_until + 1500ms);
  EXPECT_FALSE(held.lost());
}

// The renewal's time is counted from the validity's start, not from its end less the ttl: a
// drift allowance larger than a third of the ttl does not make every renewal due at once.
TEST(SqliteLockTest, AHeldLockWithALargeDriftAllowanceRenewsOnceAThirdOfTheTtl) {
  TempDir dir;
  FakeClock clock;
  auto client = LockClient::Open("sqlite://" + dir.File("locks.db"),
                                 {.ttl = 3s, .drift_min = 1500ms, .clock = &clock})
                    .value();
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  HeldLock held(*client, *lease, {.auto_renew = true});
  clock.Advance(1s);  // a third of the ttl: one renewal due, the next a second of fake time on
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= 1; }));
  // The clock stands still: a renewal due at once after each renewal would show here.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(held.renewals(), 1u);
  EXPECT_FALSE(held.lost());
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
