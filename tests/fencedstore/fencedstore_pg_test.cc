// What is particular to the PostgreSQL engine, on a real PostgreSQL server: several stores on one
// database, a lost or stalled connection, the schema's ownership and version, and secrets kept
// out of messages. (The rules themselves run on both engines in fencedstore_*_test.)
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "support/servers/pg_client.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::QuerySql;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

std::unique_ptr<FencedStore> Open(StoreOptions o) {
  auto s = FencedStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The backends of fencekit's connections (application_name "fencekit") to the database at
// `uri`: the server is shared with other tests' databases.
std::vector<std::string> StoreBackends(const std::string& uri) {
  auto pids = QuerySql(uri,
                       "SELECT pid FROM pg_stat_activity WHERE application_name = 'fencekit' "
                       "AND pid <> pg_backend_pid() AND datname = current_database()");
  EXPECT_TRUE(pids.ok()) << pids.status().ToString();
  return pids.ok() ? *pids : std::vector<std::string>{};
}

// Begins a transaction on `other` in which another fenced's batch writes `key` = `value` under
// lock L at `token`: decided, its locks held, not committed. Its outcome.
Result<std::string> WriteInAnOpenTransaction(testing::PgClient& other, int token,
                                             const std::string& key, const std::string& value) {
  return other.Value("BEGIN; SELECT o_outcome FROM fencekit.write(false, 'L'::bytea, " +
                     std::to_string(token) + ", '" + key + "'::bytea, '" + value +
                     "'::bytea, NULL, NULL, 0, NULL, false, false, 0, NULL, true)");
}

TEST(PostgresStoreTest, TwoStoresOnOneDatabaseShareEveryFence) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto a = Open({.path = db});
  auto b = Open({.path = db});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Put("L", T(10), "k", "from a").ok());
  auto stale = b->Put("L", T(5), "k", "from b");
  ASSERT_TRUE(stale.status().IsStaleToken()) << stale.status().ToString();
  EXPECT_EQ(HighestToken(stale.status()), 10);
  ASSERT_TRUE(b->Put("L", T(11), "k", "from b").ok());
  EXPECT_TRUE(a->Put("L", T(10), "k", "late a").status().IsStaleToken());
  EXPECT_EQ(a->Get("k")->value, "from b");
  EXPECT_EQ(a->Get("k")->version, 2);
}

TEST(PostgresStoreTest, ConcurrentStoresNeverAcceptATokenBelowAnAcceptedOne) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  std::vector<std::unique_ptr<FencedStore>> stores;
  for (int i = 0; i < 3; ++i) stores.push_back(Open({.path = db}));
  // Writers through all three stores at once, each lock's tokens rising, the same keys.
  constexpr int kWriters = 6, kWrites = 60;
  std::vector<std::future<std::vector<std::int64_t>>> accepted;
  for (int w = 0; w < kWriters; ++w) {
    accepted.push_back(std::async(std::launch::async, [&, w] {
      std::vector<std::int64_t> mine;
      for (int i = 0; i < kWrites; ++i) {
        std::int64_t token = i * kWriters + w + 1;
        auto r = stores[(w + i) % 3]->Put("L", T(token), "k" + std::to_string(i % 4),
                                          std::to_string(token));
        if (r.ok()) mine.push_back(token);
        EXPECT_TRUE(r.ok() || r.status().IsStaleToken()) << r.status().ToString();
      }
      return mine;
    }));
  }
  std::int64_t max_accepted = 0;
  for (auto& f : accepted) {
    for (std::int64_t t : f.get()) max_accepted = std::max(max_accepted, t);
  }
  // The history is the order of decisions on the fence's row lock: accepted tokens never go
  // down in it, and every refusal names a higher accepted token.
  auto history = stores[0]->History(10000);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), static_cast<std::size_t>(kWriters * kWrites));
  std::int64_t highest = 0;
  for (const Decision& d : *history) {
    if (d.accepted) {
      EXPECT_GE(d.token, highest) << "seq " << d.seq;
      highest = d.token;
    } else {
      EXPECT_LT(d.token, d.highest);
      EXPECT_LE(d.highest, highest);
    }
  }
  EXPECT_EQ(*stores[1]->Highest("L"), T(max_accepted));
  // A batch whose writes of one lock differ in token locks that fence exclusively before them,
  // so no batch upgrades a shared lock that another batch holds too: PostgreSQL never had to
  // abort a batch to break a deadlock (it did, and after 5 in a row the writes failed).
  std::uint64_t retries = 0;
  for (const auto& s : stores) retries += s->Stats().retries;
  EXPECT_EQ(retries, 0u);
}

TEST(PostgresStoreTest, WritesAtTheFencesTokenDoNotWaitForEachOthersCommits) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto a = Open({.path = db});
  ASSERT_TRUE(a && a->Put("L", T(5), "k1", "v1").ok());
  // Another fenced's batch at the fence's token, decided and not committed yet.
  testing::PgClient other(db);
  ASSERT_TRUE(other.ok()) << other.error();
  auto open = WriteInAnOpenTransaction(other, 5, "k2", "v2");
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  ASSERT_EQ(*open, "accepted");
  auto b = Open({.path = db, .database_timeout = std::chrono::milliseconds(3000)});
  ASSERT_TRUE(b);
  // Holding the fence shared, it does not hold up a write at the same token...
  auto same = b->Put("L", T(5), "k3", "v3");
  EXPECT_TRUE(same.ok()) << same.status().ToString();
  // ...while one that moves the fence waits for it to end.
  auto c = Open({.path = db, .database_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(c);
  auto raise = c->Put("L", T(6), "k4", "v4");
  EXPECT_TRUE(raise.status().IsUnavailable()) << raise.status().ToString();
  ASSERT_TRUE(other.Query("COMMIT").ok());
  auto after = c->Put("L", T(6), "k4", "v4");
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(a->Get("k2")->value, "v2");
  EXPECT_TRUE(a->Put("L", T(5), "k1", "late").status().IsStaleToken());
}

// True once a backend of the store at `uri` waits for a row lock another transaction holds.
bool AStoreWaitsForALock(const std::string& uri) {
  return testing::WaitFor([&] {
    auto waiting = QuerySql(uri,
                            "SELECT pid FROM pg_stat_activity WHERE application_name = "
                            "'fencekit' AND datname = current_database() AND "
                            "wait_event_type = 'Lock'");
    return waiting.ok() && !waiting->empty();
  });
}

// Submits `w` to `store` without waiting for its answer.
std::future<Result<WriteReceipt>> Submitted(FencedStore& store, WriteRequest w) {
  auto done = std::make_shared<std::promise<Result<WriteReceipt>>>();
  store.Submit(std::move(w), [done](Result<WriteReceipt> r) { done->set_value(std::move(r)); });
  return done->get_future();
}

// Begins a transaction on `other` that holds lock `lock`'s fence: a store's next batch that
// writes under it waits, and the writes queued meanwhile make the batch after it.
bool HoldFence(testing::PgClient& other, const std::string& lock) {
  return other.Query("BEGIN; SELECT 1 FROM fencekit.fences WHERE lock = '" + lock + "' FOR UPDATE")
      .ok();
}

// A query of `what` over the rows of fencekit.write_many called directly with two puts under
// lock L at token 5: keys, values and services (SQL literals) of each.
std::string WriteManyOfTwoPuts(const std::string& what, const std::string& keys,
                               const std::string& values, const std::string& services) {
  return "SELECT " + what + " FROM fencekit.write_many(ARRAY[false, false], " +
         "ARRAY['L', 'L']::bytea[], ARRAY[5, 5]::int8[], ARRAY[" + keys + "]::bytea[], ARRAY[" +
         values + "]::bytea[], ARRAY[" + services + "]::text[], ARRAY[NULL, NULL]::bytea[], " +
         "ARRAY[0, 0]::int8[], ARRAY[NULL, NULL]::text[], ARRAY[NULL, NULL]::bytea[], " +
         "ARRAY[false, false], false, false, 0, true)";
}

// A store whose lock L has its fence at 5 (k1 = "v1").
class PostgresFenceAtFiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::NewPostgresDatabase();
    ASSERT_FALSE(db_.empty());
    store_ = Open({.path = db_});
    ASSERT_TRUE(store_ && store_->Put("L", T(5), "k1", "v1").ok());
  }

  std::string db_;
  std::unique_ptr<FencedStore> store_;
};

// The same, beside another fenced's batch left open.
class PostgresBesideAnOpenBatchTest : public PostgresFenceAtFiveTest {
 protected:
  // The other batch writes `key` = `value` under L at `token` and keeps its transaction open;
  // `write` runs through the store meanwhile and must wait for that transaction's locks; then
  // the other batch commits. `write`'s answer.
  Result<WriteReceipt> WriteBesideIt(int token, const std::string& key, const std::string& value,
                                     std::function<Result<WriteReceipt>()> write) {
    testing::PgClient other(db_);
    EXPECT_TRUE(other.ok()) << other.error();
    auto outcome = WriteInAnOpenTransaction(other, token, key, value);
    EXPECT_TRUE(outcome.ok() && *outcome == "accepted")
        << (outcome.ok() ? *outcome : outcome.status().ToString());
    auto answer = std::async(std::launch::async, std::move(write));
    EXPECT_TRUE(AStoreWaitsForALock(db_));
    EXPECT_TRUE(other.Query("COMMIT").ok());
    return answer.get();
  }
};

TEST_F(PostgresBesideAnOpenBatchTest, AWriteIsDecidedOnTheFenceAsLockedNotAsFirstRead) {
  // The other batch moves the fence to 6: a write at 5 reads the fence at 5 unlocked (a
  // holder's write at its token), then waits for the lock.
  auto r = WriteBesideIt(6, "k2", "v2", [&] { return store_->Put("L", T(5), "k1", "late"); });
  ASSERT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
  EXPECT_EQ(HighestToken(r.status()), 6);
  EXPECT_EQ(store_->Get("k1")->value, "v1");
}

TEST_F(PostgresBesideAnOpenBatchTest, AKeyCreatedByAnotherStoreMeanwhileIsWrittenAfterItNotOverIt) {
  // The other batch creates k2 at the fence's token: a write of k2 finds it absent, then waits
  // to create it.
  auto r = WriteBesideIt(5, "k2", "first", [&] { return store_->Put("L", T(5), "k2", "second"); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->created);
  auto now = store_->Get("k2");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->value, "second");
  EXPECT_EQ(now->version, r->version);
  auto history = store_->History(10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_TRUE((*history)[2].accepted);
  EXPECT_EQ((*history)[2].key, "k2");
}

TEST_F(PostgresFenceAtFiveTest, AWriteThatBindsAFenceIsDecidedAsSuchAmongWritesThatDoNot) {
  ASSERT_TRUE(store_->Put("M", T(5), "m1", "v1").ok());
  // Another transaction holds fence L: the writes queued meanwhile are decided together.
  testing::PgClient other(db_);
  ASSERT_TRUE(other.ok()) << other.error();
  ASSERT_TRUE(HoldFence(other, "L"));
  auto submit = [&](std::string lock, std::string key, std::string service) {
    return Submitted(*store_, {WriteRequest::Kind::kPut, std::move(lock), T(5), std::move(key), "v",
                               std::move(service)});
  };
  auto first = submit("L", "k1", "");
  ASSERT_TRUE(AStoreWaitsForALock(db_));
  // A holder's write at its fence's token, and one at M's that binds M to its service.
  auto plain = submit("L", "k2", "");
  auto binding = submit("M", "m2", "sqlite:2222");
  ASSERT_TRUE(other.Query("COMMIT").ok());
  for (auto* f : {&first, &plain, &binding}) {
    auto r = f->get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  auto fence = store_->Fence("M");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->service, "sqlite:2222");
  auto other_service =
      store_->Write({WriteRequest::Kind::kPut, "M", T(6), "m1", "v", "sqlite:1111"});
  EXPECT_TRUE(other_service.status().IsWrongService()) << other_service.status().ToString();
  EXPECT_EQ((*store_->Fence("L"))->service, "");
}

TEST_F(PostgresFenceAtFiveTest, WritesOfOneKeyInOneBatchApplyInTheOrderSent) {
  // Another transaction holds fence L: the writes queued meanwhile are one batch, after it.
  testing::PgClient other(db_);
  ASSERT_TRUE(other.ok()) << other.error();
  ASSERT_TRUE(HoldFence(other, "L"));
  auto submit = [&](std::string key, std::string value) {
    return Submitted(*store_,
                     {WriteRequest::Kind::kPut, "L", T(5), std::move(key), std::move(value)});
  };
  auto first = submit("k1", "v2");
  ASSERT_TRUE(AStoreWaitsForALock(db_));
  auto one = submit("k2", "one");
  auto two = submit("k2", "two");
  auto three = submit("k2", "three");
  auto after = submit("k3", "v");
  ASSERT_TRUE(other.Query("COMMIT").ok());
  std::vector<std::int64_t> versions;
  for (auto* f : {&first, &one, &two, &three, &after}) {
    auto r = f->get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    versions.push_back(r->version);
  }
  EXPECT_LT(versions[1], versions[2]);
  EXPECT_LT(versions[2], versions[3]);
  auto now = store_->Get("k2");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->value, "three");
  EXPECT_EQ(now->version, versions[3]);
  EXPECT_EQ(store_->Get("k3")->value, "v");
}

TEST_F(PostgresFenceAtFiveTest, WriteManyCalledDirectlyBindsAFenceTheFirstServiceNamedAtItsToken) {
  // Two writes of lock L at its token, one naming no service, one naming the first: fenced
  // locks such a fence exclusively first, but the function must decide them right without it.
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto outcomes = direct.Value(WriteManyOfTwoPuts("string_agg(o_outcome, ',')", "'k2', 'k3'",
                                                  "'v', 'v'", "NULL, 'sqlite:2222'"));
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  EXPECT_EQ(*outcomes, "accepted,accepted");
  auto fence = store_->Fence("L");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->service, "sqlite:2222");
}

TEST_F(PostgresFenceAtFiveTest, WriteManyCalledDirectlyWritesOneKeyTwiceInOrder) {
  // fenced sends a key written twice in a batch as two calls, but the function must apply
  // both, in order: one statement writing both would change the row once.
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto versions = direct.Value(WriteManyOfTwoPuts("string_agg(o_outcome || ' ' || o_version, ',')",
                                                  "'k1', 'k1'", "'first', 'second'", "NULL, NULL"));
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  auto now = store_->Get("k1");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->value, "second");
  EXPECT_EQ(*versions, "accepted " + std::to_string(now->version - 1) + ",accepted " +
                           std::to_string(now->version));
}

TEST_F(PostgresFenceAtFiveTest, WriteManyCalledDirectlyRefusesAKeyOfAnotherLockAndWritesTheRest) {
  // The set-based statement leaves a key bound to another lock undecided; fencekit.write then
  // refuses it in the same call, and the batch's other write is made.
  ASSERT_TRUE(store_->Put("M", T(3), "m1", "theirs").ok());
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto outcomes = direct.Value(WriteManyOfTwoPuts("string_agg(o_outcome, ',')", "'k1', 'm1'",
                                                  "'mine', 'mine too'", "NULL, NULL"));
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  EXPECT_EQ(*outcomes, "accepted,wrong_lock");
  auto k1 = store_->Get("k1");
  auto m1 = store_->Get("m1");
  ASSERT_TRUE(k1.ok() && m1.ok());
  EXPECT_EQ(k1->value, "mine");
  EXPECT_EQ(m1->value, "theirs");
}

TEST(PostgresStoreTest, ConditionalWritesAtOneTokenThroughTwoStoresLoseNoUpdate) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto a = Open({.path = db});
  auto b = Open({.path = db});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Put("L", T(7), "counter", "0").ok());
  // Read-modify-write increments by one holder through both stores at once: each applies only
  // at the version it read, so every accepted one counts.
  constexpr int kThreads = 4, kTries = 40;
  std::vector<std::future<int>> counted;
  for (int t = 0; t < kThreads; ++t) {
    counted.push_back(std::async(std::launch::async, [&, t] {
      FencedStore& store = t % 2 == 0 ? *a : *b;
      int mine = 0;
      for (int i = 0; i < kTries; ++i) {
        auto got = store.Get("counter");
        if (!got.ok()) {
          ADD_FAILURE() << got.status().ToString();
          break;
        }
        auto r = store.Write({.lock = "L",
                              .token = T(7),
                              .key = "counter",
                              .value = std::to_string(std::stoi(got->value) + 1),
                              .if_version = got->version});
        if (r.ok()) {
          ++mine;
        } else {
          EXPECT_EQ(r.status().code(), StatusCode::kPreconditionFailed) << r.status().ToString();
        }
      }
      return mine;
    }));
  }
  int accepted = 0;
  for (auto& f : counted) accepted += f.get();
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(a->Get("counter")->value, std::to_string(accepted));
}

TEST(PostgresStoreTest, ALostConnectionIsRemadeAndNothingIsAcknowledgedOnTheWay) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto store = Open({.path = db});
  ASSERT_TRUE(store->Put("L", T(1), "k", "before").ok());
  ASSERT_TRUE(store->Get("k").ok());
  auto killed = QuerySql(db,
                         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = 'fencekit' AND datname = current_database()");
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_FALSE(killed->empty());
  // The first write finds the connection gone: it fails unacknowledged (or, if the loss was
  // seen before sending, already runs on a new connection). The next one runs for sure.
  auto first = store->Put("L", T(2), "k", "after");
  EXPECT_TRUE(first.ok() || first.status().IsUnavailable()) << first.status().ToString();
  auto second = store->Put("L", T(3), "k", "after");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto got = store->Get("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->value, "after");
}

TEST(PostgresStoreTest, CheckWritableConnectsAgainAfterALostConnectionWithoutAWrite) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto store = Open({.path = db, .database_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(store->Put("L", T(1), "k", "v").ok());
  auto killed = QuerySql(db,
                         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = 'fencekit' AND datname = current_database()");
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_FALSE(killed->empty());
  // The first probe may find the connection gone; the next one connects again.
  Status first = store->CheckWritable();
  EXPECT_TRUE(first.ok() || first.IsUnavailable()) << first.ToString();
  Status second = store->CheckWritable();
  EXPECT_TRUE(second.ok()) << second.ToString();
  // A stalled server fails the probe within the database timeout.
  std::vector<std::string> stopped = StoreBackends(db);
  ASSERT_FALSE(stopped.empty());
  for (const auto& pid : stopped) ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  auto start = std::chrono::steady_clock::now();
  Status stalled = store->CheckWritable();
  auto took = std::chrono::steady_clock::now() - start;
  for (const auto& pid : stopped) ::kill(std::stoi(pid), SIGCONT);
  EXPECT_TRUE(stalled.IsUnavailable()) << stalled.ToString();
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(store->Get("k")->value, "v");
}

TEST(PostgresStoreTest, AStalledServerFailsTheWriteWithinTheTimeoutAndTheStoreRecovers) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto store = Open({.path = db, .database_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(store->Put("L", T(1), "k", "v").ok());
  std::vector<std::string> stopped = StoreBackends(db);
  ASSERT_FALSE(stopped.empty());
  for (const auto& pid : stopped) ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  auto start = std::chrono::steady_clock::now();
  auto r = store->Put("L", T(2), "k", "v2");
  auto took = std::chrono::steady_clock::now() - start;
  for (const auto& pid : stopped) ::kill(std::stoi(pid), SIGCONT);
  EXPECT_TRUE(r.status().IsUnavailable()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("may or may not"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(5));
  auto again = store->Put("L", T(3), "k", "v3");
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(PostgresStoreTest, ConcurrentOpensOfANewDatabaseMigrateOnce) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  std::vector<std::future<Status>> opens;
  for (int i = 0; i < 4; ++i) {
    opens.push_back(std::async(std::launch::async, [&] {
      auto s = FencedStore::Open({.path = db});
      return s.ok() ? Status::Ok() : s.status();
    }));
  }
  for (auto& f : opens) EXPECT_TRUE(f.get().ok());
  auto version = QuerySql(db, "SELECT version FROM fencekit.schema_version");
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, std::vector<std::string>{"2"});
}

TEST(PostgresStoreTest, MigratesASchemaVersion1StoreNumberingAboveItsVersions) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  {
    auto store = Open({.path = db});
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Put("L", T(1), "k", "v").ok());
  }
  // Back to schema 1's shape: versions counted per key (here 41), no sequence, no batches, and
  // fencekit.write with version 1's result (no o_prior), which CREATE OR REPLACE cannot change.
  auto v1 = QuerySql(
      db,
      "DROP FUNCTION fencekit.write_batch; DROP FUNCTION fencekit.write; "
      "DROP SEQUENCE fencekit.versions; "
      "CREATE FUNCTION fencekit.write(p_delete boolean, p_lock bytea, p_token bigint, p_key "
      "bytea, p_value bytea, p_service text, p_prefix_lock bytea, p_verify integer, p_refusal "
      "text, p_strict boolean, p_unguarded boolean, p_now_ms bigint, p_principal bytea, "
      "p_record boolean, OUT o_outcome text, OUT o_highest bigint, OUT o_version bigint, OUT "
      "o_bound_lock bytea, OUT o_fence_service text, OUT o_seq bigint) LANGUAGE sql AS "
      "$$SELECT 'accepted', 0::bigint, 0::bigint, NULL::bytea, NULL::text, 0::bigint$$; "
      "UPDATE fencekit.objects SET version = 41; "
      "UPDATE fencekit.schema_version SET version = 1");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto store = Open({.path = db});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get("k")->version, 41);
  auto next = store->Put("L", T(1), "k", "w");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->version, 42);
  EXPECT_EQ(store->Put("L", T(1), "new", "w")->version, 43);
  auto batch = store->WriteBatch({"L", T(1), {}, {}, {ObjectWrite{false, "b", "v", kIfAbsent}}});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(QuerySql(db, "SELECT version FROM fencekit.schema_version").value(),
            std::vector<std::string>{"2"});
}

TEST(PostgresStoreTest, RefusesASchemaNamedFencekitThatIsNotAStore) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  ASSERT_TRUE(QuerySql(db, "CREATE SCHEMA fencekit; CREATE TABLE fencekit.mine(x int)").ok());
  auto s = FencedStore::Open({.path = db});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsInvalidArgument()) << s.status().ToString();
  EXPECT_NE(s.status().message().find("not a fencekit store"), std::string::npos);
  EXPECT_TRUE(QuerySql(db, "SELECT x FROM fencekit.mine").ok());
}

TEST(PostgresStoreTest, RefusesAStoreWrittenByANewerVersion) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  ASSERT_TRUE(Open({.path = db}) != nullptr);
  ASSERT_TRUE(QuerySql(db, "UPDATE fencekit.schema_version SET version = 99").ok());
  auto s = FencedStore::Open({.path = db});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsInvalidArgument());
  EXPECT_NE(s.status().message().find("newer fencekit"), std::string::npos)
      << s.status().ToString();
}

TEST(PostgresStoreTest, AnUnreachableDatabaseFailsClearlyWithoutItsPassword) {
  auto s = FencedStore::Open({.path = "postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=2"});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsUnavailable()) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cannot connect"), std::string::npos);
  EXPECT_EQ(s.status().message().find("hunter2"), std::string::npos) << s.status().message();
  EXPECT_EQ(DescribeDatabase("postgresql://u:hunter2@h/db?password=x&sslmode=require"),
            "postgresql://u:***@h/db?password=***&sslmode=require");
  EXPECT_EQ(DescribeDatabase("/var/lib/fenced.db"), "/var/lib/fenced.db");
}

// A role that may not create the store's schema is told, by fenced, the grant it needs; with that
// grant alone it starts (docs/operations-postgresql.md sets a role up from zero).
TEST(PostgresStoreTest, ARoleThatMayNotCreateTheSchemaIsToldTheGrantItNeeds) {
  const std::string admin = testing::NewPostgresDatabase();  // owned by postgres
  ASSERT_FALSE(admin.empty());
  const std::string role = "limited_" + std::to_string(::getpid());
  const std::string dbname = admin.substr(admin.rfind('/') + 1);
  ASSERT_TRUE(QuerySql(admin, "CREATE ROLE " + role + " LOGIN").ok());
  std::string as_role = admin;
  as_role.replace(as_role.find("postgres@"), 8, role);
  auto start = [&] {
    return testing::RunCommand(
        {testing::FencedBinary(), "--listen", "127.0.0.1:0", "--db", as_role});
  };
  auto refused = start();
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  const std::string grant = "GRANT CREATE ON DATABASE " + dbname + " TO " + role + ";";
  EXPECT_NE(refused.err.find("the role " + role + " may not create the store's schema fencekit"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find(grant), std::string::npos) << refused.err;
  // The grant it names is enough.
  ASSERT_TRUE(QuerySql(admin, grant).ok());
  auto store = Open({.path = as_role});
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Put("L", T(1), "k", "v").ok());
}

}  // namespace
}  // namespace fencekit
