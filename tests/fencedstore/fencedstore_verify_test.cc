// Verification on advance (StoreOptions::verify) against a real lock service: the SQLite lock
// backend in a temporary file, asked through a LockClient. Faults (a failing or slow lock
// service) are injected around that real client.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "fencekit/fencedstore/store.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/lock_services.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::TempDir;
using testing::WaitFor;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

constexpr char kService[] = "sqlite:00112233445566778899aabbccddeeff";

class VerifyTest : public testing::EngineFixture {
 protected:
  void SetUp() override {
    auto client = LockClient::Open("sqlite://" + dir_.File("locks.db"));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    locks_ = std::move(client).value();
  }

  // The verifier fenced builds, over the real lock client, with the injected faults.
  TokenVerifier Verifier() {
    return [this](std::string_view lock, FencingToken token) -> Result<TokenVerdict> {
      {
        std::unique_lock l(mu_);
        // A slow lock service: answers once the test opens the gate (bounded wait).
        gate_cv_.wait_for(l, std::chrono::seconds(10), [&] { return gate_open_; });
        if (failing_) return Status::Unavailable("injected: the lock service is down");
      }
      auto check = locks_->CheckToken(lock, token);
      if (!check.ok()) return check.status();
      return TokenVerdict{check->current, service_};
    };
  }
  void CloseGate() {
    std::lock_guard l(mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    {
      std::lock_guard l(mu_);
      gate_open_ = true;
    }
    gate_cv_.notify_all();
  }
  void SetFailing(bool failing) {
    std::lock_guard l(mu_);
    failing_ = failing;
  }

  std::unique_ptr<FencedStore> Open(StoreOptions o = {}) {
    o.path = Db();
    o.verify = Verifier();
    return testing::ValueOrThrow(FencedStore::Open(o), "opening the store");
  }

  Lease Acquire(const std::string& lock) {
    auto lease = locks_->TryAcquire(lock, std::chrono::seconds(60));
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    return lease.ok() ? *lease : Lease{};
  }

  static WriteRequest Put(const std::string& lock, FencingToken token, std::string key,
                          std::string service = {}) {
    return {WriteRequest::Kind::kPut, lock, token, std::move(key), "v", std::move(service)};
  }

  std::unique_ptr<LockClient> locks_;
  std::string service_ = kService;
  std::mutex mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = true;
  bool failing_ = false;
};

// The same tests on a SQLite file and on a PostgreSQL database.
using VerifyEngineTest = testing::OnEachEngine<VerifyTest>;
FENCEKIT_ON_EACH_ENGINE(VerifyEngineTest);

TEST_P(VerifyEngineTest, ForgedHigherTokenIsRefusedAndRecordedAndChangesNothing) {
  auto store = Open();
  Lease lease = Acquire("lock");
  ASSERT_TRUE(store->Put("lock", lease.token, "k", "real").ok());
  auto forged = store->Put("lock", T(lease.token.value() + 1000), "k", "forged");
  ASSERT_FALSE(forged.ok());
  EXPECT_TRUE(forged.status().IsUnverifiedToken()) << forged.status().ToString();
  EXPECT_EQ(store->Highest("lock")->value(), lease.token);
  EXPECT_EQ(store->Get("k")->value, "real");
  auto h = store->History(10);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 2u);
  EXPECT_FALSE(h->back().accepted);
  EXPECT_EQ(h->back().reason, "unverified_token");
  EXPECT_EQ(h->back().highest, lease.token.value());
  auto stats = store->Stats();
  EXPECT_EQ(stats.refused(StatusCode::kUnverifiedToken), 1u);
  EXPECT_EQ(stats.verifications, 2u);
  // A forged first write of another lock creates no fence.
  EXPECT_TRUE(store->Put("free", T(7), "f", "x").status().IsUnverifiedToken());
  EXPECT_FALSE(store->Highest("free")->has_value());
}

TEST_P(VerifyEngineTest, HolderWritesManyTimesWithOneCall) {
  auto store = Open();
  Lease lease = Acquire("lock");
  for (int i = 0; i < 20; ++i) {
    auto r = store->Put("lock", lease.token, "k" + std::to_string(i % 3), "v");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto stats = store->Stats();
  EXPECT_EQ(stats.accepted, 20u);
  EXPECT_EQ(stats.verifications, 1u);
}

TEST_P(VerifyEngineTest, ConcurrentFirstWritesOfOneHolderShareOneCall) {
  auto store = Open();
  Lease lease = Acquire("lock");
  CloseGate();  // every write reaches the store before the lock service answers
  constexpr int kWrites = 16;
  std::vector<std::future<Result<WriteReceipt>>> results;
  for (int i = 0; i < kWrites; ++i) {
    auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
    results.push_back(p->get_future());
    store->Submit(Put("lock", lease.token, "k" + std::to_string(i)),
                  [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
  }
  ASSERT_TRUE(WaitFor([&] { return store->Stats().verifications == 1; }));
  OpenGate();
  for (auto& f : results) {
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(store->Stats().verifications, 1u);
  EXPECT_EQ(store->Stats().accepted, static_cast<std::uint64_t>(kWrites));
}

TEST_P(VerifyEngineTest, NextHolderIsVerifiedAndTheOldTokenIsStale) {
  auto store = Open();
  Lease first = Acquire("lock");
  ASSERT_TRUE(store->Put("lock", first.token, "k", "1").ok());
  ASSERT_TRUE(locks_->Release(first).ok());
  Lease second = Acquire("lock");
  ASSERT_GT(second.token, first.token);
  ASSERT_TRUE(store->Put("lock", second.token, "k", "2").ok());
  EXPECT_TRUE(store->Put("lock", first.token, "k", "old").status().IsStaleToken());
  EXPECT_EQ(store->Stats().verifications, 2u);
}

TEST_P(VerifyEngineTest, LockServiceDownFailsClosedAndRecordsNothing) {
  auto store = Open();
  Lease lease = Acquire("lock");
  SetFailing(true);
  auto r = store->Put("lock", lease.token, "k", "v");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsTimeout()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("lock service"), std::string::npos);
  EXPECT_FALSE(store->Highest("lock")->has_value());
  EXPECT_TRUE(store->Get("k").status().IsNotFound());
  EXPECT_TRUE(store->History(10)->empty());
  EXPECT_EQ(store->Stats().verify_failures, 1u);
  SetFailing(false);
  EXPECT_TRUE(store->Put("lock", lease.token, "k", "v").ok());
}

TEST_P(VerifyEngineTest, TooManyWaitingVerificationsAreRefusedAtOnce) {
  auto store = Open({.verify_threads = 1, .max_queued_verifications = 1});
  CloseGate();
  auto submit = [&](std::int64_t token) {
    auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
    auto f = p->get_future();
    store->Submit(Put("lock", T(token), "k"),
                  [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
    return f;
  };
  auto running = submit(1);
  ASSERT_TRUE(WaitFor([&] { return store->Stats().verifications == 1; }));
  auto queued = submit(2);
  auto refused = submit(3).get();
  EXPECT_TRUE(refused.status().IsTimeout()) << refused.status().ToString();
  OpenGate();
  EXPECT_TRUE(running.get().status().IsUnverifiedToken());
  EXPECT_TRUE(queued.get().status().IsUnverifiedToken());
}

TEST_P(VerifyEngineTest, VerifiedTokenBindsTheFenceToTheConfirmingService) {
  auto store = Open();
  Lease lease = Acquire("lock");
  ASSERT_TRUE(store->Write(Put("lock", lease.token, "k")).ok());
  EXPECT_EQ((*store->Fence("lock"))->service, kService);
  // A write naming another service than the one that confirms its token is refused.
  ASSERT_TRUE(locks_->Release(lease).ok());
  Lease next = Acquire("lock");
  auto r = store->Write(Put("lock", next.token, "k", "redis:ffff"));
  EXPECT_TRUE(r.status().IsWrongService()) << r.status().ToString();
  EXPECT_EQ(store->Highest("lock")->value(), lease.token);
  EXPECT_TRUE(store->Write(Put("lock", next.token, "k", kService)).ok());
}

TEST_P(VerifyEngineTest, OnlyAConfirmedWriteBindsTheFenceToAService) {
  service_ = "";  // a lock service that does not name itself
  auto store = Open();
  Lease lease = Acquire("lock");
  ASSERT_TRUE(store->Write(Put("lock", lease.token, "k")).ok());
  // Anyone may send the fence's token (it is public); naming a service with it binds nothing.
  ASSERT_TRUE(store->Write(Put("lock", lease.token, "k", "evil:1")).ok());
  EXPECT_EQ((*store->Fence("lock"))->service, "");
  ASSERT_TRUE(locks_->Release(lease).ok());
  Lease next = Acquire("lock");
  // Confirmed, but by a service that does not name itself: the write's claim binds nothing.
  ASSERT_TRUE(store->Write(Put("lock", next.token, "k", "sqlite:aa")).ok());
  EXPECT_EQ((*store->Fence("lock"))->service, "");
}

// A fence set by hand is not confirmed: a write at its token is checked with the lock service
// once, so an administrator who picks an old holder's token does not let that holder back in.
TEST_P(VerifyEngineTest, AFenceSetByHandIsConfirmedBeforeWritesAtItsTokenPass) {
  auto store = Open();
  Lease old = Acquire("lock");
  ASSERT_TRUE(store->Put("lock", old.token, "k", "old").ok());
  ASSERT_TRUE(locks_->Release(old).ok());
  Lease current = Acquire("lock");
  ASSERT_TRUE(store->Put("lock", current.token, "k", "current").ok());
  ASSERT_TRUE(store->SetFence("lock", old.token, "admin", false).ok());
  std::uint64_t calls = store->Stats().verifications;
  auto r = store->Put("lock", old.token, "k", "old again");
  EXPECT_TRUE(r.status().IsUnverifiedToken()) << r.status().ToString();
  EXPECT_EQ(store->Stats().verifications, calls + 1);
  EXPECT_EQ(store->Get("k")->value, "current");
  // The current holder is confirmed once, then writes without calls.
  ASSERT_TRUE(store->Put("lock", current.token, "k", "v1").ok());
  ASSERT_TRUE(store->Put("lock", current.token, "k", "v2").ok());
  EXPECT_EQ(store->Stats().verifications, calls + 2);
}

// A fence made before verification was on was never confirmed: a write at its token is
// checked, so a token that poisoned the fence then cannot keep writing once verify is on.
TEST_P(VerifyEngineTest, AFenceMadeWithoutVerificationIsCheckedAtItsToken) {
  Lease gone = Acquire("lock");
  {
    auto plain = FencedStore::Open({.path = Db()});
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE((*plain)->Put("lock", gone.token, "k", "v").ok());
  }
  ASSERT_TRUE(locks_->Release(gone).ok());
  auto store = Open();
  auto r = store->Put("lock", gone.token, "k", "again");
  EXPECT_TRUE(r.status().IsUnverifiedToken()) << r.status().ToString();
  EXPECT_EQ(store->Stats().verifications, 1u);
  Lease holder = Acquire("lock");
  ASSERT_TRUE(store->Put("lock", holder.token, "k", "v1").ok());
  ASSERT_TRUE(store->Put("lock", holder.token, "k", "v2").ok());
  EXPECT_EQ(store->Stats().verifications, 2u);
}

// Closing does not make writes queued behind a slow lock service wait for it.
TEST_P(VerifyEngineTest, CloseFailsWritesWhoseVerificationHasNotStarted) {
  auto store = Open({.verify_threads = 1});
  Lease a = Acquire("a");
  Lease b = Acquire("b");
  CloseGate();
  auto submit = [&](const Lease& lease) {
    auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
    auto f = p->get_future();
    store->Submit(Put(lease.lock, lease.token, "k-" + lease.lock),
                  [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
    return f;
  };
  auto running = submit(a);
  ASSERT_TRUE(WaitFor([&] { return store->Stats().verifications == 1; }));
  auto queued = submit(b);
  std::thread closer([&] { EXPECT_TRUE(store->Close().ok()); });
  // Answered while the running call still waits on the (closed) gate.
  bool answered = queued.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  OpenGate();
  closer.join();
  ASSERT_TRUE(answered) << "the queued write waited for the running call";
  auto r = queued.get();
  EXPECT_TRUE(r.status().IsTimeout()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("closing"), std::string::npos) << r.status().message();
  EXPECT_EQ(store->Stats().verifications, 1u);
  EXPECT_TRUE(running.get().ok());
}

TEST_P(VerifyEngineTest, LoweredFenceVerifiesAnOldTokenAgain) {
  auto store = Open();
  std::vector<Lease> leases;
  for (int i = 0; i < 3; ++i) {
    if (!leases.empty()) {
      ASSERT_TRUE(locks_->Release(leases.back()).ok());
    }
    leases.push_back(Acquire("lock"));
    ASSERT_TRUE(store->Put("lock", leases.back().token, "k", "v").ok());
  }
  // An administrator lowers the fence below the second holder's token: that token is no
  // longer current, so it may not move the fence up again, though it was accepted once.
  ASSERT_TRUE(store->SetFence("lock", leases[0].token, "admin", false).ok());
  auto r = store->Put("lock", leases[1].token, "k", "old");
  EXPECT_TRUE(r.status().IsUnverifiedToken()) << r.status().ToString();
  EXPECT_EQ(store->Highest("lock")->value(), leases[0].token);
  EXPECT_TRUE(store->Put("lock", leases[2].token, "k", "current").ok());
  EXPECT_EQ(store->Highest("lock")->value(), leases[2].token);
}

TEST_P(VerifyEngineTest, CloseWaitsForWritesUnderVerification) {
  auto store = Open();
  Lease lease = Acquire("lock");
  CloseGate();
  auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
  auto f = p->get_future();
  store->Submit(Put("lock", lease.token, "k"),
                [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
  ASSERT_TRUE(WaitFor([&] { return store->Stats().verifications == 1; }));
  std::thread opener([&] { OpenGate(); });
  ASSERT_TRUE(store->Close().ok());
  opener.join();
  EXPECT_TRUE(f.get().ok());
}

// The same guard over each of the four real lock services, with the verifier fenced builds
// (LockClient::CheckToken): a forged token far ahead never moves the fence, and the holder's
// writes cost one call, the first.
WriteRequest Request(const std::string& lock, FencingToken token, std::string key,
                     std::string service) {
  return {WriteRequest::Kind::kPut, lock, token, std::move(key), "v", std::move(service)};
}

class VerifyOnEachLockServiceTest : public ::testing::TestWithParam<testing::Backend> {};

TEST_P(VerifyOnEachLockServiceTest, AForgedTokenIsRefusedAndTheHoldersWritesCostOneCall) {
  TempDir dir;
  testing::LockService service(GetParam(), dir);
  auto locks = LockClient::Open(service.uri);
  ASSERT_TRUE(locks.ok()) << locks.status().ToString();
  LockClient* client = locks->get();
  auto store = FencedStore::Open(
      {.path = dir.File("store.db"),
       .verify = [client](std::string_view lock, FencingToken token) -> Result<TokenVerdict> {
         auto check = client->CheckToken(lock, token);
         if (!check.ok()) return check.status();
         return TokenVerdict{check->current, check->service};
       }});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto lease = client->TryAcquire("lock", std::chrono::seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  for (int i = 0; i < 5; ++i) {
    auto w =
        (*store)->Write(Request("lock", lease->token, "k" + std::to_string(i), lease->service));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  EXPECT_EQ((*store)->Stats().verifications, 1u);
  EXPECT_EQ((*(*store)->Fence("lock"))->service, lease->service);

  FencingToken forged = T(lease->token.value() + 1000);
  auto r = (*store)->Write(Request("lock", forged, "k0", lease->service));
  EXPECT_TRUE(r.status().IsUnverifiedToken()) << r.status().ToString();
  EXPECT_EQ((*store)->Highest("lock")->value(), lease->token);
  EXPECT_EQ((*store)->Get("k0")->token, lease->token);
  EXPECT_EQ((*store)->Stats().refused(StatusCode::kUnverifiedToken), 1u);
  // The holder goes on writing, without another call.
  ASSERT_TRUE((*store)->Write(Request("lock", lease->token, "k0", lease->service)).ok());
  EXPECT_EQ((*store)->Stats().verifications, 2u);
}

INSTANTIATE_TEST_SUITE_P(LockServices, VerifyOnEachLockServiceTest,
                         ::testing::Values(testing::Backend::kSqlite, testing::Backend::kRedis,
                                           testing::Backend::kRedlock, testing::Backend::kEtcd),
                         testing::BackendName);

}  // namespace
}  // namespace fencekit
