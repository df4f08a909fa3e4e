// Behaviour of FencedStore against real SQLite files in a temporary folder.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "fencekit/fencedstore/store.h"
#include "support/faults/fault_vfs.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::FaultVfs;
using testing::TempDir;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

// Writes `batches` batches of `writes` puts (keys k0, k1, ...) under lock "lock", token 1, one
// after the other: a commit each.
void WriteBatches(FencedStore& store, int batches, int writes) {
  for (int b = 0; b < batches; ++b) {
    BatchRequest batch{.lock = "lock", .token = T(1)};
    for (int w = 0; w < writes; ++w) {
      batch.writes.push_back({.key = "k" + std::to_string(w), .value = std::to_string(b)});
    }
    auto r = store.WriteBatch(std::move(batch));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
}

class FencedStoreTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<FencedStore> Open(StoreOptions o = {}) {
    if (o.path.empty()) o.path = Db();
    return testing::ValueOrThrow(FencedStore::Open(o), "opening the store");
  }
};

// The same tests on a SQLite file and on a PostgreSQL database.
using FencedStoreEngineTest = testing::OnEachEngine<FencedStoreTest>;
FENCEKIT_ON_EACH_ENGINE(FencedStoreEngineTest);

TEST_P(FencedStoreEngineTest, AcceptsFirstWriteAndCreatesKey) {
  auto store = Open();
  auto r = store->Put("lock", T(5), "k", "v1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->version, 1);
  auto got = store->Get("k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->value, "v1");
  EXPECT_EQ(got->token, T(5));
  EXPECT_EQ(got->lock, "lock");
}

TEST_P(FencedStoreEngineTest, RefusesStaleTokenAndNamesHighest) {
  auto store = Open();
  ASSERT_TRUE(store->Put("lock", T(5), "k", "new").ok());
  auto r = store->Put("lock", T(4), "k", "stale");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsStaleToken());
  EXPECT_EQ(HighestToken(r.status()), 5);
  EXPECT_NE(r.status().message().find("5"), std::string::npos);
  EXPECT_EQ(store->Get("k")->value, "new");
}

TEST_P(FencedStoreEngineTest, RefusedWriteChangesNothing) {
  auto store = Open();
  ASSERT_TRUE(store->Put("lock", T(9), "a", "kept").ok());
  ASSERT_FALSE(store->Put("lock", T(3), "a", "x").ok());
  ASSERT_FALSE(store->Put("lock", T(3), "b", "x").ok());
  ASSERT_FALSE(store->Delete("lock", T(3), "a").ok());
  EXPECT_EQ(store->Get("a")->value, "kept");
  EXPECT_EQ(store->Get("a")->version, 1);
  EXPECT_TRUE(store->Get("b").status().IsNotFound());
  EXPECT_EQ(store->Highest("lock")->value(), T(9));
}

TEST_P(FencedStoreEngineTest, AcceptsEqualTokenSoOneHolderWritesManyTimes) {
  auto store = Open();
  ASSERT_TRUE(store->Put("lock", T(7), "k", "1").ok());
  auto r = store->Put("lock", T(7), "k", "2");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->version, 2);
}

TEST_P(FencedStoreEngineTest, StrictModeRefusesEqualToken) {
  auto store = Open({.strict = true});
  ASSERT_TRUE(store->Put("lock", T(7), "k", "1").ok());
  auto r = store->Put("lock", T(7), "k", "2");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsStaleToken());
  EXPECT_TRUE(store->Put("lock", T(8), "k", "3").ok());
}

TEST_P(FencedStoreEngineTest, UnguardedDemoModeAcceptsStaleWrites) {
  auto store = Open({.unguarded = true});
  ASSERT_TRUE(store->Put("lock", T(34), "k", "new").ok());
  auto stale = store->Put("lock", T(33), "k", "stale");
  ASSERT_TRUE(stale.ok()) << "unguarded mode must show the lost update";
  EXPECT_EQ(store->Get("k")->value, "stale");
  EXPECT_EQ(store->Highest("lock")->value(), T(34));
}

TEST_P(FencedStoreEngineTest, FencesAreIndependentPerLock) {
  auto store = Open();
  ASSERT_TRUE(store->Put("a", T(100), "x", "1").ok());
  EXPECT_TRUE(store->Put("b", T(1), "y", "1").ok());
  EXPECT_FALSE(store->Highest("c")->has_value());
}

TEST_P(FencedStoreEngineTest, DeleteIsFencedLikeAWrite) {
  auto store = Open();
  ASSERT_TRUE(store->Put("lock", T(5), "k", "v").ok());
  EXPECT_TRUE(store->Delete("lock", T(4), "k").status().IsStaleToken());
  EXPECT_TRUE(store->Get("k").ok());
  auto d = store->Delete("lock", T(6), "k");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->version, 1);
  EXPECT_TRUE(store->Get("k").status().IsNotFound());
  EXPECT_EQ(store->Highest("lock")->value(), T(6));
  auto again = store->Delete("lock", T(6), "k");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->version, 0);  // absent: accepted, nothing deleted
}

TEST_P(FencedStoreEngineTest, KeysRoundTripAnyBytesButControlCharacters) {
  auto store = Open();
  std::string key("k\xff\x80/\xc3\xa9 ?%", 9);
  std::string value("\0\x01\xfe", 3);
  ASSERT_TRUE(store->Put(key, T(1), key, value).ok());
  EXPECT_EQ(store->Get(key)->value, value);
  EXPECT_EQ(store->Get(key)->lock, key);
}

TEST_P(FencedStoreEngineTest, RejectsBadKeysWithClearErrors) {
  auto store = Open();
  for (const std::string& key : {std::string(), std::string(1025, 'k'), std::string("a\0b", 3),
                                 std::string("a\r\nb"), std::string("a\x1b[2J")}) {
    auto r = store->Put("lock", T(1), key, "v");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  }
  EXPECT_TRUE(store->Put("lock", T(1), std::string(1024, 'k'), "v").ok());
  EXPECT_TRUE(store->Put("", T(1), "k", "v").status().IsInvalidArgument());
  EXPECT_EQ(store->Highest("lock")->value(), T(1));
}

TEST_P(FencedStoreEngineTest, RestartKeepsHighestToken) {
  {
    auto store = Open();
    ASSERT_TRUE(store->Put("lock", T(41), "k", "v").ok());
  }
  auto store = Open();
  EXPECT_EQ(store->Highest("lock")->value(), T(41));
  EXPECT_TRUE(store->Put("lock", T(40), "k", "x").status().IsStaleToken());
  EXPECT_EQ(store->Get("k")->value, "v");
}

// Commits a transaction of two writes: a writer with a linger then waits for the next one to
// fill its batch.
void CommitATransactionOfTwo(FencedStore& store) {
  EXPECT_TRUE(
      store.WriteBatch({"lock", T(1), "", "", {{false, "b", "1"}, {false, "c", "1"}}}).ok());
}

// Commits a transaction of two writes, then queues a put: what the put answers.
std::future<Result<WriteReceipt>> PutAfterATransactionOfTwo(FencedStore& store) {
  CommitATransactionOfTwo(store);
  auto put = std::make_shared<std::promise<Result<WriteReceipt>>>();
  store.Submit({WriteRequest::Kind::kPut, "lock", T(1), "d", "1"},
               [put](Result<WriteReceipt> r) { put->set_value(std::move(r)); });
  return put->get_future();
}

// The linger (StoreOptions::batch_linger) for the next transaction after one of several writes:
// a write waits for another to join it, here until the batch is full (max_batch 2), however
// long the linger.
TEST_F(FencedStoreTest, WithALingerAWriteAfterATransactionOfSeveralWaitsForAnotherToJoinIt) {
  StoreOptions o;
  o.max_batch = 2;
  o.batch_linger = std::chrono::minutes(10);
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  // A lone write after a lone write does not wait.
  ASSERT_TRUE(store->Put("lock", T(1), "a", "1").ok());
  ASSERT_TRUE(store->Put("lock", T(1), "a", "2").ok());
  auto first_done = PutAfterATransactionOfTwo(*store);
  // Without the linger it would commit within milliseconds.
  EXPECT_EQ(first_done.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  ASSERT_TRUE(store->Put("lock", T(1), "e", "1").ok());  // joins it: the batch is full
  ASSERT_EQ(first_done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(first_done.get().ok());
  // Commits of 1 write: two; of 2: the client's batch and the one the lone write waited for.
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.batch_size_buckets[0], 2u);
  EXPECT_EQ(stats.batch_size_buckets[1], 2u);
  EXPECT_EQ(stats.commits, 4u);
}

// Close does not wait out a linger: the queued write commits at once.
TEST_F(FencedStoreTest, CloseCommitsAWriteWaitingInALingerAtOnce) {
  StoreOptions o;
  o.batch_linger = std::chrono::minutes(10);
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  auto done = PutAfterATransactionOfTwo(*store);
  ASSERT_EQ(done.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  Status closed = Status::Internal("not closed");
  std::thread closer([&] { closed = store->Close(); });
  const bool in_time = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!in_time) std::abort();  // Close waits out the linger: the thread cannot be joined
  EXPECT_TRUE(done.get().ok());
  closer.join();
  EXPECT_TRUE(closed.ok()) << closed.ToString();
}

// Submits `batch` and then `put` while the writer lingers after a transaction of two writes, so
// that both land in one commit (max_batch 3: the batch's two writes and the put fill it).
struct OneCommit {
  std::future<Result<std::vector<WriteReceipt>>> batch;
  std::future<Result<WriteReceipt>> put;
};
OneCommit SubmitInOneCommit(FencedStore& store, BatchRequest batch, WriteRequest put) {
  CommitATransactionOfTwo(store);
  auto b = std::make_shared<std::promise<Result<std::vector<WriteReceipt>>>>();
  auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
  store.SubmitBatch(std::move(batch),
                    [b](Result<std::vector<WriteReceipt>> r) { b->set_value(std::move(r)); });
  store.Submit(std::move(put), [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
  return {b->get_future(), p->get_future()};
}

// A commit skips the fence's statement for a write at a token it already let through; a batch
// refused after it moved the fence is undone, and the next write at its token moves the fence
// itself.
TEST_F(FencedStoreTest, AWriteAtTheTokenOfARefusedBatchInTheSameCommitMovesTheFence) {
  auto store = Open({.max_batch = 3, .batch_linger = std::chrono::minutes(10)});
  ASSERT_NE(store, nullptr);
  // The batch moves the fence from 1 to 5 with "x", then fails its precondition on "y".
  auto commit =
      SubmitInOneCommit(*store, {"lock", T(5), "", "", {{false, "x", "1"}, {false, "y", "1", 42}}},
                        {WriteRequest::Kind::kPut, "lock", T(5), "z", "1"});
  auto batch = commit.batch.get();
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kPreconditionFailed) << batch.status().ToString();
  auto put = commit.put.get();
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(store->Stats().commits, 2u);  // the first batch's, then one for both
  auto fence = store->Fence("lock");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->highest, T(5));
  EXPECT_FALSE(store->Get("x").ok());
  // Without the linger (a lone write would wait out its ten minutes), the fence holds.
  ASSERT_TRUE(store->Close().ok());
  store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Put("lock", T(4), "z", "2").status().IsStaleToken());
}

// In one commit, a write at the token another write let through, with a service other than the
// one the fence is now bound to, is refused.
TEST_F(FencedStoreTest, AWriteOfAnotherServiceAtTheSameTokenInTheSameCommitIsRefused) {
  auto store = Open({.max_batch = 3, .batch_linger = std::chrono::minutes(10)});
  ASSERT_NE(store, nullptr);
  auto commit = SubmitInOneCommit(
      *store, {"lock", T(5), "redis:aaaa", "", {{false, "x", "1"}, {false, "y", "1"}}},
      {WriteRequest::Kind::kPut, "lock", T(5), "z", "1", "etcd:bbbb"});
  ASSERT_TRUE(commit.batch.get().ok());
  auto put = commit.put.get();
  EXPECT_TRUE(put.status().IsWrongService()) << put.status().ToString();
  EXPECT_EQ(store->Stats().commits, 2u);
  auto fence = store->Fence("lock");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->service, "redis:aaaa");
}

TEST_F(FencedStoreTest, RefusesNonFencekitDatabase) {
  std::string path = dir_.File("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = FencedStore::Open({.path = path});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a fencekit store"), std::string::npos);
}

TEST_F(FencedStoreTest, RefusesSchemaFromNewerVersion) {
  std::string path = dir_.File("store.db");
  { Open(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = FencedStore::Open({.path = path});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("newer fencekit"), std::string::npos);
}

TEST_P(FencedStoreEngineTest, HistoryRecordsDecisionsAndStaysBounded) {
  FakeClock clock;
  auto store = Open({.history_limit = 100, .clock = &clock});
  ASSERT_TRUE(store->Put("lock", T(2), "k", "v").ok());
  ASSERT_FALSE(store->Put("lock", T(1), "k", "v").ok());
  auto h = store->History(10);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 2u);
  EXPECT_TRUE((*h)[0].accepted);
  EXPECT_FALSE((*h)[1].accepted);
  EXPECT_EQ((*h)[1].token, 1);
  EXPECT_EQ((*h)[1].highest, 2);
  EXPECT_EQ((*h)[1].time, clock.WallNow());
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(store->Put("lock", T(3 + i), "k", "v").ok());
  auto all = store->History(100000);
  ASSERT_TRUE(all.ok());
  EXPECT_LE(all->size(), 100u + 64u);
  EXPECT_EQ(all->back().token, 402);
}

// A batch records a decision per write: the history's trim must count records, not batches.
// After one single write, every batch of 16 ends the history at 1 past a multiple of 16; a trim
// that looked for a multiple of 64 among a commit's batches (not its records) never came.
TEST_P(FencedStoreEngineTest, HistoryStaysBoundedUnderBatchesOfManyWrites) {
  constexpr std::size_t kLimit = 100;
  constexpr int kBatches = 200, kWrites = 16;
  auto store = Open({.history_limit = kLimit});
  ASSERT_TRUE(store->Put("lock", T(1), "single", "v").ok());
  ASSERT_NO_FATAL_FAILURE(WriteBatches(*store, kBatches, kWrites));
  auto all = store->History(100000);
  ASSERT_TRUE(all.ok());
  // PostgreSQL trims every 64 commits: at most 64 batches' records over the limit.
  EXPECT_LE(all->size(), kLimit + 64u * kWrites) << "of " << 1 + kBatches * kWrites << " records";
  EXPECT_GE(all->size(), kLimit);
  EXPECT_EQ(all->back().key, "k15");
}

// A history far over its limit (the store reopened with a lower one) shrinks by at most 4,096
// rows per trim, over several trims: no single commit pays for deleting all of it. SQLite trims
// after 64 records or more, PostgreSQL every 64 commits.
TEST_P(FencedStoreEngineTest, AHistoryFarOverItsLimitShrinksOverSeveralTrims) {
  auto history_size = [](FencedStore& store) {
    auto all = store.History(100000);
    EXPECT_TRUE(all.ok());
    return all.ok() ? all->size() : 0;
  };
  {
    auto store = Open({.history_limit = 1'000'000});
    ASSERT_NO_FATAL_FAILURE(WriteBatches(*store, 10, 1000));
    EXPECT_EQ(history_size(*store), 10'000u);
  }
  // 64 commits of one record each, and 64 records: one trim on either engine, of the 4,096
  // oldest decisions. On SQLite a commit's decisions are one row and go whole: the oldest run,
  // and the runs ending within 4,095 seqs after it.
  auto store = Open({.history_limit = 100});
  ASSERT_NO_FATAL_FAILURE(WriteBatches(*store, 64, 1));
  const std::size_t after_one_trim = history_size(*store);
  if (GetParam() == testing::StoreEngine::kSqlite) {
    EXPECT_EQ(after_one_trim, 10'064u - 5 * 1'000u);
  } else {
    EXPECT_EQ(after_one_trim, 10'064u - 4'096u);
  }
  // Three more trims bring it down to the limit.
  ASSERT_NO_FATAL_FAILURE(WriteBatches(*store, 3 * 64, 1));
  EXPECT_LE(history_size(*store), 100u + 64u);
}

// Many threads submit writes with random tokens through group commit. The history (in commit
// order) must never show an accepted token below an earlier accepted one for its lock, every
// acknowledged outcome must match the history, and batches must really form.
TEST_P(FencedStoreEngineTest, ConcurrentRandomTokensKeepFenceInvariant) {
  auto store = Open({.history_limit = 1'000'000});
  constexpr int kThreads = 8, kWrites = 400;
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::future<void>> pending;
      for (int i = 0; i < kWrites; ++i) {
        std::string lock = "lock" + std::to_string(rng() % 4);
        auto token = T(1 + static_cast<std::int64_t>(rng() % 1000));
        auto done = std::make_shared<std::promise<void>>();
        pending.push_back(done->get_future());
        // Keys of each lock of their own: a key belongs to the lock that created it.
        store->Submit({WriteRequest::Kind::kPut, lock, token,
                       lock + "/key" + std::to_string(rng() % 16), "v"},
                      [&, done](Result<WriteReceipt> r) {
                        if (r.ok()) {
                          ++accepted;
                        } else {
                          EXPECT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
                          ++refused;
                        }
                        done->set_value();
                      });
      }
      for (auto& f : pending) f.wait();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(accepted + refused, kThreads * kWrites);
  EXPECT_GT(refused.load(), 0);
  auto history = store->History(1'000'000);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), static_cast<std::size_t>(kThreads * kWrites));
  std::map<std::string, std::int64_t> highest;
  int history_accepted = 0;
  for (const auto& d : *history) {
    auto& h = highest[d.lock];
    if (d.accepted) {
      EXPECT_GE(d.token, h) << "accepted token below an earlier accepted one, seq " << d.seq;
      h = d.token;
      ++history_accepted;
    } else {
      EXPECT_LT(d.token, h) << "refused a token that was not stale, seq " << d.seq;
    }
  }
  EXPECT_EQ(history_accepted, accepted.load());
  for (const auto& [lock, h] : highest) EXPECT_EQ(store->Highest(lock)->value().value(), h);
  auto stats = store->Stats();
  EXPECT_LT(stats.commits, static_cast<std::uint64_t>(kThreads * kWrites))
      << "group commit never batched two writes";
}

TEST_F(FencedStoreTest, FailedCommitAcknowledgesNothing) {
  FaultVfs::Register();
  auto store = Open({.sqlite_vfs = FaultVfs::kName});
  ASSERT_TRUE(store->Put("lock", T(1), "before", "v").ok());
  FaultVfs::fail_sync = true;
  auto r = store->Put("lock", T(2), "during", "v");
  FaultVfs::fail_sync = false;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsIoError()) << r.status().ToString();
  // The commit's frames are in the WAL, unsynced: the store cannot know what will be kept.
  EXPECT_NE(r.status().message().find("may or may not have been stored"), std::string::npos)
      << r.status().message();
  // The store keeps working once the fault is gone, and the failed write is not visible.
  EXPECT_TRUE(store->Get("during").status().IsNotFound());
  EXPECT_EQ(store->Highest("lock")->value(), T(1));
  EXPECT_TRUE(store->Put("lock", T(2), "after", "v").ok());
}

TEST_F(FencedStoreTest, AfterAFailedFsyncTheStoreRechecksAndLosesNothingAtAPowerLoss) {
  FaultVfs::Register();
  FaultVfs::StartPowerLossModel();  // a failed sync now loses what it could not write
  {
    auto store = Open({.sqlite_vfs = FaultVfs::kName});
    ASSERT_TRUE(store->Put("lock", T(1), "before", "v1").ok());
    FaultVfs::fail_sync = true;
    auto failed = store->Put("lock", T(2), "during", "v2");
    FaultVfs::fail_sync = false;
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(store->Stats().recoveries, 0u);
    // The next write reopens and checks the database first, and is acknowledged after that.
    ASSERT_TRUE(store->Put("lock", T(3), "after", "v3").ok());
    EXPECT_EQ(store->Stats().recoveries, 1u);
    FaultVfs::fail_sync = true;
    ASSERT_FALSE(store->Put("lock", T(4), "during", "v4").ok());
    FaultVfs::fail_sync = false;
    ASSERT_TRUE(store->Put("lock", T(6), "last", "v6").ok());
    EXPECT_EQ(store->Stats().recoveries, 2u);
  }
  FaultVfs::LosePower(FaultVfs::Loss::kDrop, 1);
  auto store = Open();
  EXPECT_EQ(store->Get("before")->value, "v1");
  EXPECT_EQ(store->Get("after")->value, "v3");
  EXPECT_EQ(store->Get("last")->value, "v6");
  EXPECT_EQ(store->Highest("lock")->value(), T(6));
}

// The writer hands the WAL a commit's frames in one write (wal_write_batching.h), not a write
// per frame header and per page, and they are as durable as before: synced before the answer.
TEST_F(FencedStoreTest, ACommitWritesItsFramesInOneWriteAndOneSync) {
  FaultVfs::Register();
  {
    auto store = Open({.sqlite_vfs = FaultVfs::kName});
    ASSERT_TRUE(store->Put("lock", T(1), "before", "v1").ok());
    FaultVfs::StartPowerLossModel();
    ASSERT_TRUE(store->Put("lock", T(2), "k", std::string(5000, 'v')).ok());
    // The commit changed several pages (the object and its overflow page, the fence, the
    // version counter, the history): one write of them all, one sync.
    EXPECT_EQ(FaultVfs::calls(), 2u);
    FaultVfs::CrashAt(FaultVfs::calls() + 1);  // the power goes now: not even the close's I/O
  }
  FaultVfs::LosePower(FaultVfs::Loss::kTorn, 7);
  auto store = Open();
  EXPECT_EQ(store->Get("k")->value, std::string(5000, 'v'));
  EXPECT_EQ(store->Highest("lock")->value(), T(2));
}

// A commit of more than the batching's largest write (64 KiB) goes out in several, each below
// the 128 KiB the unix VFS writes at most per call (it reads a longer one's shortfall as a full
// disk).
TEST_F(FencedStoreTest, ACommitOfSeveralHundredKibibytesIsStoredWhole) {
  auto store = Open();
  const std::string value(300 * 1024 + 7, 'x');
  ASSERT_TRUE(store->Put("lock", T(1), "big", value).ok());
  BatchRequest batch{.lock = "lock", .token = T(1)};
  for (int i = 0; i < 3; ++i)
    batch.writes.push_back({.key = "b" + std::to_string(i), .value = value});
  ASSERT_TRUE(store->WriteBatch(std::move(batch)).ok());
  store.reset();
  store = Open();
  EXPECT_EQ(store->Get("big")->value, value);
  EXPECT_EQ(store->Get("b2")->value, value);
}

TEST_F(FencedStoreTest, CheckWritableRecoversAfterAFailedFsyncAndFailsWhileFsyncFails) {
  FaultVfs::Register();
  auto store = Open({.sqlite_vfs = FaultVfs::kName});
  ASSERT_TRUE(store->Put("lock", T(1), "k", "v1").ok());
  EXPECT_TRUE(store->CheckWritable().ok());
  FaultVfs::fail_sync = true;
  ASSERT_FALSE(store->Put("lock", T(2), "k", "v2").ok());
  // The probe's commit must be synced like a write's, so a disk that fails fsync fails it.
  Status still = store->CheckWritable();
  EXPECT_TRUE(still.IsIoError() || still.IsUnavailable()) << still.ToString();
  FaultVfs::fail_sync = false;
  // No write needed: the probe reopens and checks the database, as the next write would.
  EXPECT_TRUE(store->CheckWritable().ok());
  EXPECT_GE(store->Stats().recoveries, 1u);
  // The failed write was answered "may or may not have been stored": the reopened database
  // may keep its frames from the WAL. The probe itself changed no key.
  std::string value = store->Get("k")->value;
  EXPECT_TRUE(value == "v1" || value == "v2") << value;
}

TEST_F(FencedStoreTest, FullDiskFailsEveryWriteOfTheBatch) {
  FaultVfs::Register();
  auto store = Open({.sqlite_vfs = FaultVfs::kName});
  ASSERT_TRUE(store->Put("lock", T(1), "before", "v").ok());
  FaultVfs::disk_full = true;
  constexpr int kWrites = 32;
  std::vector<std::future<Result<WriteReceipt>>> results;
  for (int i = 0; i < kWrites; ++i) {
    auto p = std::make_shared<std::promise<Result<WriteReceipt>>>();
    results.push_back(p->get_future());
    store->Submit(
        {WriteRequest::Kind::kPut, "lock", T(2), "k" + std::to_string(i), std::string(8192, 'x')},
        [p](Result<WriteReceipt> r) { p->set_value(std::move(r)); });
  }
  for (auto& f : results) {
    auto r = f.get();
    EXPECT_FALSE(r.ok()) << "a write was acknowledged while the disk was full";
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("disk"), std::string::npos) << r.status().ToString();
    }
  }
  FaultVfs::disk_full = false;
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_TRUE(store->Get("k" + std::to_string(i)).status().IsNotFound());
  }
  EXPECT_TRUE(store->Put("lock", T(2), "after", "v").ok());
}

TEST_F(FencedStoreTest, OpenFailsWithClearErrorWhenFolderIsMissing) {
  auto s = FencedStore::Open({.path = dir_.File("missing-dir/store.db")});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing-dir"), std::string::npos);
}

TEST_P(FencedStoreEngineTest, WritesAfterCloseFailAsUnavailable) {
  auto store = Open();
  ASSERT_TRUE(store->Close().ok());
  EXPECT_TRUE(store->Put("lock", T(1), "k", "v").status().IsUnavailable());
  EXPECT_TRUE(store->CheckWritable().IsUnavailable());
}

TEST_P(FencedStoreEngineTest, CheckWritableCommitsNothingAClientCanSee) {
  auto store = Open();
  auto first = store->Put("lock", T(1), "k", "v1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const auto commits = store->Stats().commits;
  for (int i = 0; i < 3; ++i) {
    Status s = store->CheckWritable();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(store->History(100)->size(), 1u);
  EXPECT_EQ(store->Stats().commits, commits) << "a probe is not a client's commit";
  auto second = store->Put("lock", T(1), "k", "v2");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->version, first->version + 1) << "the probe moved the version counter";
}

}  // namespace
}  // namespace fencekit
