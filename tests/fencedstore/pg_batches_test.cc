// The PostgreSQL engine beside another fenced's open batch on the same database, and its
// write_many called directly: decisions on the fence as locked, writes of one key in order.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "support/open_store.h"
#include "support/servers/pg_client.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"
#include "fencedstore/pg_open_batch.h"

namespace fencekit {
namespace {

using testing::QuerySql;

constexpr auto T = testing::TokenOf;
constexpr auto Open = testing::OpenStore;

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

// One put of fencekit.write_many's arguments: its lock, token and key, its value and service
// as SQL literals.
struct Put {
  std::string lock;
  int token;
  std::string key;
  std::string value = "'v'";
  std::string service = "NULL";
};

// A query of `what` over the rows of fencekit.write_many called directly with `puts`, in that
// order.
std::string WriteManyOf(const std::string& what, const std::vector<Put>& puts) {
  std::string deletes, locks, tokens, keys, values, services, nulls, zeros, falses;
  for (const Put& p : puts) {
    const char* sep = deletes.empty() ? "" : ", ";
    deletes += std::string(sep) + "false";
    locks += std::string(sep) + "'" + p.lock + "'";
    tokens += sep + std::to_string(p.token);
    keys += std::string(sep) + "'" + p.key + "'";
    values += sep + p.value;
    services += sep + p.service;
    nulls += std::string(sep) + "NULL";
    zeros += std::string(sep) + "0";
    falses += std::string(sep) + "false";
  }
  return "SELECT " + what + " FROM fencekit.write_many(ARRAY[" + deletes + "], ARRAY[" + locks +
         "]::bytea[], ARRAY[" + tokens + "]::int8[], ARRAY[" + keys + "]::bytea[], ARRAY[" +
         values + "]::bytea[], ARRAY[" + services + "]::text[], ARRAY[" + nulls +
         "]::bytea[], ARRAY[" + zeros + "]::int8[], ARRAY[" + nulls + "]::text[], ARRAY[" +
         nulls + "]::bytea[], ARRAY[" + falses + "], false, false, 0, true)";
}

// The outcomes of write_many called with `puts` in a transaction of its own, then the number
// of calls of fencekit.write it made (the write-by-write path): "accepted,stale_token 0".
Result<std::string> OutcomesAndCallsOfWrite(testing::PgClient& direct,
                                            const std::vector<Put>& puts) {
  auto outcomes = direct.Query("BEGIN; SET LOCAL track_functions = 'pl'; " +
                               WriteManyOf("string_agg(o_outcome, ',')", puts));
  if (!outcomes.ok()) return outcomes.status();
  auto calls = direct.Value(
      "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE schemaname = "
      "'fencekit' AND funcname = 'write'");
  if (!calls.ok()) return calls.status();
  if (auto done = direct.Query("COMMIT"); !done.ok()) return done.status();
  return (*outcomes)[0][0] + " " + *calls;
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
    auto outcome = testing::WriteInAnOpenTransaction(other, token, key, value);
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
  auto outcomes = direct.Value(WriteManyOf(
      "string_agg(o_outcome, ',')", {{"L", 5, "k2"}, {"L", 5, "k3", "'v'", "'sqlite:2222'"}}));
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
  auto versions = direct.Value(WriteManyOf("string_agg(o_outcome || ' ' || o_version, ',')",
                                           {{"L", 5, "k1", "'first'"}, {"L", 5, "k1", "'second'"}}));
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
  auto outcomes = direct.Value(WriteManyOf("string_agg(o_outcome, ',')",
                                           {{"L", 5, "k1", "'mine'"}, {"L", 5, "m1", "'mine too'"}}));
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  EXPECT_EQ(*outcomes, "accepted,wrong_lock");
  auto k1 = store_->Get("k1");
  auto m1 = store_->Get("m1");
  ASSERT_TRUE(k1.ok() && m1.ok());
  EXPECT_EQ(k1->value, "mine");
  EXPECT_EQ(m1->value, "theirs");
}

// A call whose set-based statement could not make one of its writes (its key created by
// another transaction meanwhile) still takes the others as made, once each, and leaves only
// that one to fencekit.write, which writes it after the other's.
TEST_F(PostgresBesideAnOpenBatchTest, WriteManyWritesTheRestOnceWhenAnotherCreatedOneOfItsKeys) {
  testing::PgClient other(db_);
  ASSERT_TRUE(other.ok()) << other.error();
  auto open = testing::WriteInAnOpenTransaction(other, 5, "k2", "theirs");
  ASSERT_TRUE(open.ok() && *open == "accepted") << (open.ok() ? *open : open.status().ToString());
  auto made = std::async(std::launch::async, [&] {
    testing::PgClient direct(db_);
    return direct.ok() ? OutcomesAndCallsOfWrite(
                             direct, {{"L", 5, "k1", "'one'"}, {"L", 5, "k2", "'two'"},
                                      {"L", 5, "k3", "'three'"}})
                       : Result<std::string>(Status::Unavailable(direct.error()));
  });
  EXPECT_TRUE(testing::WaitFor([&] {  // the call's insert of k2 waits for theirs
    auto waiting = QuerySql(db_,
                            "SELECT pid FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'");
    return waiting.ok() && !waiting->empty();
  }));
  ASSERT_TRUE(other.Query("COMMIT").ok());
  auto outcomes = made.get();
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  EXPECT_EQ(*outcomes, "accepted,accepted,accepted 1");  // only k2 went write by write
  for (auto [key, value] : {std::pair{"k1", "one"}, std::pair{"k2", "two"},
                            std::pair{"k3", "three"}}) {
    auto now = store_->Get(key);
    ASSERT_TRUE(now.ok()) << key << ": " << now.status().ToString();
    EXPECT_EQ(now->value, value) << key;
  }
  // k1's first write, theirs, then one each of this call's.
  auto history = store_->History(10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 5u);
}

TEST_F(PostgresFenceAtFiveTest, WriteManyMakesTheFencesOfNewLocksWithoutGoingWriteByWrite) {
  // With a lock per entity most writes are their lock's first: the common batch makes their
  // fences at their tokens, in the statements it runs for all its writes.
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto made = OutcomesAndCallsOfWrite(
      direct, {{"L", 5, "k1"}, {"N", 3, "n1"}, {"N", 3, "n2"}, {"P", 9, "p1"}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(*made, "accepted,accepted,accepted,accepted 0");
  for (auto [lock, token] : {std::pair{"N", 3}, std::pair{"P", 9}}) {
    auto fence = store_->Fence(lock);
    ASSERT_TRUE(fence.ok() && fence->has_value()) << lock;
    EXPECT_EQ((*fence)->highest, T(token)) << lock;
    EXPECT_TRUE((*fence)->service.empty()) << lock;
  }
  EXPECT_EQ(store_->Get("n2")->value, "v");
  auto history = store_->History(10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 5u);
}

TEST_F(PostgresFenceAtFiveTest, WriteManyMakesANewLocksFenceAtItsFirstWritesTokenWhenTheyDiffer) {
  // N's first write makes its fence at 4, its second moves it to 6, its third is then stale:
  // decided write by write, as fenced would decide them one at a time.
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto made =
      OutcomesAndCallsOfWrite(direct, {{"N", 4, "n1"}, {"N", 6, "n2"}, {"N", 5, "n3"}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->substr(0, made->find(' ')), "accepted,accepted,stale_token");
  auto fence = store_->Fence("N");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->highest, T(6));
  EXPECT_FALSE(store_->Get("n3").ok());
}

TEST_F(PostgresFenceAtFiveTest, WriteManyMakesNoFenceForANewLockWhoseOnlyWriteIsRefused) {
  // k1 is L's: N's write of it is refused (wrong_lock), and a refusal makes no fence, so a
  // later holder of N at a lower token is not refused for it.
  testing::PgClient direct(db_);
  ASSERT_TRUE(direct.ok()) << direct.error();
  auto made = OutcomesAndCallsOfWrite(direct, {{"N", 7, "k1"}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->substr(0, made->find(' ')), "wrong_lock");
  auto fence = store_->Fence("N");
  ASSERT_TRUE(fence.ok());
  EXPECT_FALSE(fence->has_value());
  EXPECT_TRUE(store_->Put("N", T(2), "n1", "v").ok());
}

}  // namespace
}  // namespace fencekit
