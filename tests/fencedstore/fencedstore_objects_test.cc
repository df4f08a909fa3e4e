// Conditional writes, atomic batches under one grant, and listing, of FencedStore on a SQLite
// file and on a PostgreSQL database.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <string>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::TempDir;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

ObjectWrite PutOf(std::string key, std::string value, IfVersion if_version = std::nullopt) {
  return ObjectWrite{false, std::move(key), std::move(value), if_version};
}
ObjectWrite DeleteOf(std::string key, IfVersion if_version = std::nullopt) {
  return ObjectWrite{true, std::move(key), {}, if_version};
}

class ObjectsFixture : public testing::EngineFixture {
 protected:
  std::unique_ptr<FencedStore> Open(StoreOptions o = {}) {
    o.path = Db();
    return testing::ValueOrThrow(FencedStore::Open(std::move(o)), "opening the store");
  }

  static WriteRequest Conditional(std::string lock, FencingToken token, std::string key,
                                  std::string value, IfVersion if_version) {
    WriteRequest w{WriteRequest::Kind::kPut, std::move(lock), token, std::move(key),
                   std::move(value)};
    w.if_version = if_version;
    return w;
  }
  static BatchRequest Batch(std::string lock, FencingToken token, std::vector<ObjectWrite> writes) {
    return BatchRequest{std::move(lock), token, {}, {}, std::move(writes)};
  }
  // The values of `keys`, "-" for an absent one.
  static std::vector<std::string> Values(FencedStore& store, const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      auto got = store.Get(k);
      out.push_back(got.ok() ? got->value : "-");
    }
    return out;
  }
};
using ObjectsTest = testing::OnEachEngine<ObjectsFixture>;
FENCEKIT_ON_EACH_ENGINE(ObjectsTest);

// --- Conditional writes ---------------------------------------------------------------------

TEST_P(ObjectsTest, IfVersionAppliesOnlyAtThatVersion) {
  auto store = Open();
  auto first = store->Put("L", T(5), "k", "one");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = store->Write(Conditional("L", T(5), "k", "two", first->version));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_GT(second->version, first->version);
  EXPECT_FALSE(second->created);

  // The version read before the second write no longer holds: refused, even with a newer
  // token, and the fence does not move either.
  auto late = store->Write(Conditional("L", T(9), "k", "lost update", first->version));
  ASSERT_TRUE(late.status().IsPreconditionFailed()) << late.status().ToString();
  EXPECT_EQ(CurrentVersion(late.status()), second->version);
  EXPECT_EQ(RefusedKey(late.status()), "k");
  EXPECT_NE(late.status().message().find("version " + std::to_string(first->version)),
            std::string::npos)
      << late.status().message();
  EXPECT_EQ(store->Get("k")->value, "two");
  EXPECT_EQ(store->Get("k")->version, second->version);
  EXPECT_EQ(store->Highest("L")->value(), T(5));

  auto history = store->History(10);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_FALSE(history->back().accepted);
  EXPECT_EQ(history->back().reason, "precondition_failed");
  EXPECT_EQ(history->back().highest, 5);
  EXPECT_EQ(store->Stats().refused(StatusCode::kPreconditionFailed), 1u);
}

TEST_P(ObjectsTest, IfAbsentCreatesOnlyOnce) {
  auto store = Open();
  auto created = store->Write(Conditional("L", T(1), "k", "mine", kIfAbsent));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(created->created);
  auto again = store->Write(Conditional("L", T(1), "k", "theirs", kIfAbsent));
  ASSERT_TRUE(again.status().IsPreconditionFailed()) << again.status().ToString();
  EXPECT_EQ(CurrentVersion(again.status()), created->version);
  EXPECT_EQ(store->Get("k")->value, "mine");
  // On an absent key, a version precondition fails naming version 0.
  auto absent = store->Write(Conditional("L", T(1), "other", "x", 3));
  ASSERT_TRUE(absent.status().IsPreconditionFailed());
  EXPECT_EQ(CurrentVersion(absent.status()), 0);
  EXPECT_TRUE(store->Get("other").status().IsNotFound());
}

TEST_P(ObjectsTest, ConditionalDeleteAndCheckOrder) {
  auto store = Open();
  auto put = store->Put("L", T(5), "k", "v");
  ASSERT_TRUE(put.ok());
  WriteRequest del{WriteRequest::Kind::kDelete, "L", T(5), "k", {}};
  del.if_version = put->version + 1;
  EXPECT_TRUE(store->Write(del).status().IsPreconditionFailed());
  EXPECT_TRUE(store->Get("k").ok());
  // A stale token is told as stale, whatever the precondition.
  del.token = T(4);
  EXPECT_TRUE(store->Write(del).status().IsStaleToken());
  del.token = T(5);
  del.if_version = put->version;
  auto deleted = store->Write(del);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->version, put->version);
  EXPECT_TRUE(store->Get("k").status().IsNotFound());
}

TEST_P(ObjectsTest, VersionsNeverRepeatAfterADeleteAndStayAcrossRestarts) {
  std::int64_t old_version = 0;
  {
    auto store = Open();
    ASSERT_TRUE(store->Put("L", T(1), "k", "a").ok());
    old_version = store->Put("L", T(1), "k", "b")->version;
    ASSERT_TRUE(store->Delete("L", T(1), "k").ok());
  }
  auto store = Open();
  auto again = store->Put("L", T(1), "k", "c");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->created);
  EXPECT_GT(again->version, old_version);
  // An ETag read before the delete names no state of the new key.
  EXPECT_TRUE(
      store->Write(Conditional("L", T(1), "k", "d", old_version)).status().IsPreconditionFailed());
  EXPECT_EQ(store->Get("k")->value, "c");
}

TEST_P(ObjectsTest, RefusedConditionalWriteDoesNotDisturbItsGroupCommit) {
  auto store = Open();
  ASSERT_TRUE(store->Put("L", T(1), "k", "v").ok());
  // Queued together, these share group commits: each gets its own answer.
  std::vector<std::future<Result<WriteReceipt>>> answers;
  for (int i = 0; i < 60; ++i) {
    auto promise = std::make_shared<std::promise<Result<WriteReceipt>>>();
    answers.push_back(promise->get_future());
    WriteRequest w = i % 3 == 0
                         ? Conditional("L", T(1), "k", "x", kIfAbsent)
                         : Conditional("L", T(1), "key" + std::to_string(i), "v", std::nullopt);
    store->Submit(std::move(w),
                  [promise](Result<WriteReceipt> r) { promise->set_value(std::move(r)); });
  }
  for (int i = 0; i < 60; ++i) {
    auto r = answers[i].get();
    if (i % 3 == 0) {
      EXPECT_TRUE(r.status().IsPreconditionFailed()) << i << " " << r.status().ToString();
    } else {
      ASSERT_TRUE(r.ok()) << i << " " << r.status().ToString();
      EXPECT_EQ(store->Get("key" + std::to_string(i))->value, "v");
    }
  }
  EXPECT_EQ(store->Get("k")->value, "v");
}

// --- Batches --------------------------------------------------------------------------------

TEST_P(ObjectsTest, BatchAppliesEveryWriteInOrder) {
  auto store = Open();
  ASSERT_TRUE(store->Put("L", T(3), "gone", "x").ok());
  auto r = store->WriteBatch(
      Batch("L", T(4),
            {PutOf("a", "1"), PutOf("b", std::string("\0\xff", 2)), DeleteOf("gone"),
             PutOf("a", "2"), DeleteOf("b"), PutOf("b", "3", kIfAbsent)}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_TRUE((*r)[0].created);
  EXPECT_EQ((*r)[2].key, "gone");
  EXPECT_NE((*r)[2].version, 0);  // deleted
  EXPECT_FALSE((*r)[3].created);
  EXPECT_GT((*r)[3].version, (*r)[0].version);
  EXPECT_EQ((*r)[4].version, (*r)[1].version);
  EXPECT_TRUE((*r)[5].created);
  EXPECT_EQ(Values(*store, {"a", "b", "gone"}), (std::vector<std::string>{"2", "3", "-"}));
  EXPECT_EQ(store->Get("a")->version, (*r)[3].version);
  EXPECT_EQ(store->Highest("L")->value(), T(4));
  auto history = store->History(100);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 7u);  // one record per write
  EXPECT_EQ(store->Stats().accepted, 7u);
}

TEST_P(ObjectsTest, StaleBatchWritesNoneOfItsKeys) {
  auto store = Open();
  ASSERT_TRUE(store->Put("L", T(6), "a", "kept").ok());
  auto r = store->WriteBatch(
      Batch("L", T(5), {PutOf("a", "stale"), PutOf("b", "stale"), DeleteOf("a")}));
  ASSERT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
  EXPECT_EQ(HighestToken(r.status()), 6);
  EXPECT_NE(r.status().message().find("none applied"), std::string::npos) << r.status().message();
  EXPECT_EQ(Values(*store, {"a", "b"}), (std::vector<std::string>{"kept", "-"}));
  auto history = store->History(100);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);  // the put, and the batch's refusal once
  EXPECT_EQ(history->back().reason, "stale_token");
  EXPECT_EQ(history->back().key, "a");
}

TEST_P(ObjectsTest, FailedPreconditionRefusesTheWholeBatchAndNamesTheKey) {
  auto store = Open();
  auto v = store->Put("L", T(6), "c", "v");
  ASSERT_TRUE(v.ok());
  // A newer grant, whose batch's third write expects another version of "c": nothing of it
  // is applied, the fence included.
  auto r = store->WriteBatch(Batch(
      "L", T(7), {PutOf("a", "x"), DeleteOf("c"), PutOf("c", "y", v->version), PutOf("d", "z")}));
  ASSERT_TRUE(r.status().IsPreconditionFailed()) << r.status().ToString();
  EXPECT_EQ(RefusedKey(r.status()), "c");
  EXPECT_EQ(CurrentVersion(r.status()), 0);  // deleted by the batch's second write
  EXPECT_NE(r.status().message().find("write 2"), std::string::npos) << r.status().message();
  EXPECT_EQ(Values(*store, {"a", "c", "d"}), (std::vector<std::string>{"-", "v", "-"}));
  EXPECT_EQ(store->Get("c")->version, v->version);
  EXPECT_EQ(store->Highest("L")->value(), T(6));
  auto history = store->History(100);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ(history->back().reason, "precondition_failed");
  EXPECT_EQ(history->back().key, "c");
  EXPECT_EQ(history->back().highest, 6);
}

TEST_P(ObjectsTest, WrongLockInABatchRefusesItAll) {
  auto store = Open({.lock_for = {{"cfg/", "config-lock"}}});
  ASSERT_TRUE(store->Put("other", T(2), "owned", "v").ok());
  auto r = store->WriteBatch(Batch("L", T(3), {PutOf("a", "1"), PutOf("owned", "2")}));
  ASSERT_TRUE(r.status().IsWrongLock()) << r.status().ToString();
  EXPECT_EQ(BoundLock(r.status()), "other");
  r = store->WriteBatch(Batch("L", T(3), {PutOf("a", "1"), PutOf("cfg/x", "2")}));
  ASSERT_TRUE(r.status().IsWrongLock()) << r.status().ToString();
  EXPECT_EQ(BoundLock(r.status()), "config-lock");
  EXPECT_EQ(Values(*store, {"a", "owned", "cfg/x"}), (std::vector<std::string>{"-", "v", "-"}));
  EXPECT_FALSE(store->Highest("L")->has_value());
}

TEST_P(ObjectsTest, RefusedBatchLeavesTheRestOfItsGroupCommit) {
  auto store = Open({.max_batch = 512});
  ASSERT_TRUE(store->Put("old", T(10), "fence", "v").ok());
  std::vector<std::future<Result<std::vector<WriteReceipt>>>> batches;
  std::vector<std::future<Result<WriteReceipt>>> singles;
  for (int i = 0; i < 40; ++i) {
    auto b = std::make_shared<std::promise<Result<std::vector<WriteReceipt>>>>();
    batches.push_back(b->get_future());
    const std::string n = std::to_string(i);
    // Even: a good batch of its own lock. Odd: a stale one on lock "old".
    BatchRequest batch =
        i % 2 == 0 ? Batch("g" + n, T(1), {PutOf("g" + n + "/a", n), PutOf("g" + n + "/b", n)})
                   : Batch("old", T(9), {PutOf("s" + n, n)});
    store->SubmitBatch(std::move(batch), [b](auto r) { b->set_value(std::move(r)); });
    auto s = std::make_shared<std::promise<Result<WriteReceipt>>>();
    singles.push_back(s->get_future());
    store->Submit(WriteRequest{WriteRequest::Kind::kPut, "w" + n, T(1), "w" + n, n},
                  [s](auto r) { s->set_value(std::move(r)); });
  }
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    auto b = batches[i].get();
    if (i % 2 == 0) {
      ASSERT_TRUE(b.ok()) << i << " " << b.status().ToString();
      EXPECT_EQ(Values(*store, {"g" + n + "/a", "g" + n + "/b"}), (std::vector<std::string>{n, n}));
    } else {
      EXPECT_TRUE(b.status().IsStaleToken()) << i << " " << b.status().ToString();
      EXPECT_TRUE(store->Get("s" + n).status().IsNotFound());
    }
    ASSERT_TRUE(singles[i].get().ok()) << i;
    EXPECT_EQ(store->Get("w" + n)->value, n);
  }
}

TEST_P(ObjectsTest, BatchesOutsideTheBoundsAreRefusedUnstored) {
  auto store = Open({.max_batch_writes = 3, .max_batch_bytes = 10});
  EXPECT_TRUE(store->WriteBatch(Batch("L", T(1), {})).status().IsInvalidArgument());
  auto many = store->WriteBatch(
      Batch("L", T(1), {PutOf("a", ""), PutOf("b", ""), PutOf("c", ""), PutOf("d", "")}));
  ASSERT_TRUE(many.status().IsInvalidArgument());
  EXPECT_NE(many.status().message().find("4 writes"), std::string::npos);
  auto big = store->WriteBatch(Batch("L", T(1), {PutOf("a", "0123456789")}));
  ASSERT_TRUE(big.status().IsInvalidArgument());
  EXPECT_NE(big.status().message().find("11 bytes"), std::string::npos);
  auto bad_key = store->WriteBatch(Batch("L", T(1), {PutOf("a", ""), PutOf("b\n", "")}));
  ASSERT_TRUE(bad_key.status().IsInvalidArgument());
  EXPECT_NE(bad_key.status().message().find("write 1"), std::string::npos);
  EXPECT_TRUE(
      store->WriteBatch(Batch("L", T(1), {PutOf("a", "", -1)})).status().IsInvalidArgument());
  EXPECT_TRUE(store->Get("a").status().IsNotFound());
  EXPECT_FALSE(store->Highest("L")->has_value());
}

TEST_P(ObjectsTest, BatchAdvancingTheFenceIsVerifiedOnce) {
  auto locks = LockClient::Open("sqlite://" + dir_.File("locks.db"));
  ASSERT_TRUE(locks.ok()) << locks.status().ToString();
  LockClient* client = locks->get();
  std::atomic<int> calls{0};
  StoreOptions o;
  o.verify = [client, &calls](std::string_view lock, FencingToken token) -> Result<TokenVerdict> {
    ++calls;
    auto check = client->CheckToken(lock, token);
    if (!check.ok()) return check.status();
    return TokenVerdict{check->current, check->service};
  };
  auto store = Open(std::move(o));
  auto lease = client->TryAcquire("job", std::chrono::seconds(60));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto r = store->WriteBatch(Batch("job", lease->token, {PutOf("a", "1"), PutOf("b", "2")}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls.load(), 1);
  // A forged token far ahead: unverified, nothing of the batch applied.
  auto forged = store->WriteBatch(
      Batch("job", T(lease->token.value() + 100), {PutOf("a", "x"), PutOf("c", "x")}));
  ASSERT_TRUE(forged.status().IsUnverifiedToken()) << forged.status().ToString();
  EXPECT_EQ(Values(*store, {"a", "b", "c"}), (std::vector<std::string>{"1", "2", "-"}));
  EXPECT_EQ(store->Highest("job")->value(), lease->token);
}

// --- Listing --------------------------------------------------------------------------------

TEST_P(ObjectsTest, ListPagesThroughAPrefixInByteOrder) {
  auto store = Open();
  const std::vector<std::string> keys = {"a",          "a/1", "a/2", "a/\xc3\xa9", "a/\xff",
                                         "a/\xff\xff", "a0",  "b",   "\xff"};
  for (const auto& k : keys) ASSERT_TRUE(store->Put("L", T(1), k, "v:" + k).ok()) << k;
  std::vector<std::string> seen;
  std::string after;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10);
    auto page = store->List("a/", after, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(page->objects.size(), 2u);
    for (const auto& o : page->objects) {
      seen.push_back(o.key);
      EXPECT_EQ(o.lock, "L");
      EXPECT_EQ(o.token, T(1));
      EXPECT_EQ(o.version, store->Get(o.key)->version);
    }
    if (!page->next) break;
    EXPECT_EQ(*page->next, seen.back());
    after = *page->next;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a/1", "a/2", "a/\xc3\xa9", "a/\xff", "a/\xff\xff"}));

  auto all = store->List("", "", 1000);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->next);
  std::vector<std::string> every;
  for (const auto& o : all->objects) every.push_back(o.key);
  EXPECT_EQ(every, keys);  // `keys` is in byte order

  // A prefix of 0xFF bytes has no upper bound; a cursor past the prefix lists nothing.
  auto ff = store->List("\xff", "", 10);
  ASSERT_TRUE(ff.ok());
  ASSERT_EQ(ff->objects.size(), 1u);
  EXPECT_EQ(store->List("a/", "a0", 10)->objects.size(), 0u);
  EXPECT_EQ(store->List("zz", "", 10)->objects.size(), 0u);
  // A page that ends exactly at the last key says there is no more.
  auto exact = store->List("b", "", 1);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->objects.size(), 1u);
  EXPECT_FALSE(exact->next);
}

TEST_P(ObjectsTest, ListRefusesBadLimitsAndOverlongBounds) {
  auto store = Open();
  EXPECT_TRUE(store->List("", "", 0).status().IsInvalidArgument());
  EXPECT_TRUE(store->List("", "", FencedStore::kMaxListLimit + 1).status().IsInvalidArgument());
  EXPECT_TRUE(store->List(std::string(1025, 'k'), "", 10).status().IsInvalidArgument());
  EXPECT_TRUE(store->List("", std::string(1025, 'k'), 10).status().IsInvalidArgument());
  EXPECT_TRUE(store->List("", "", FencedStore::kMaxListLimit).ok());
}

}  // namespace
}  // namespace fencekit
