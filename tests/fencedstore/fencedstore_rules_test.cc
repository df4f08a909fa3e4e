// The store's rules that trust no client, against real SQLite store files: keys bound to their
// lock (and lock_for), fences bound to a lock service, require_service, fence administration,
// the reasons in the history, and the migration of a schema-1 store.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "fencekit/fencedstore/store.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::TempDir;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

WriteRequest Put(std::string lock, std::int64_t token, std::string key, std::string service = {},
                 std::string principal = {}) {
  return {WriteRequest::Kind::kPut, std::move(lock),     T(token), std::move(key), "v",
          std::move(service),       std::move(principal)};
}

class StoreRulesTest : public testing::EngineFixture {
 protected:
  std::unique_ptr<FencedStore> Open(StoreOptions o = {}) {
    if (o.path.empty()) o.path = Db();
    return testing::ValueOrThrow(FencedStore::Open(o), "opening the store");
  }
  std::vector<Decision> History(FencedStore& store) {
    auto h = store.History(1000);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : std::vector<Decision>{};
  }
};

// The same tests on a SQLite file and on a PostgreSQL database.
using StoreRulesEngineTest = testing::OnEachEngine<StoreRulesTest>;
FENCEKIT_ON_EACH_ENGINE(StoreRulesEngineTest);

TEST_P(StoreRulesEngineTest, KeyBelongsToTheLockThatCreatedIt) {
  auto store = Open();
  ASSERT_TRUE(store->Put("a", T(5), "k", "first").ok());
  for (auto r : {store->Put("b", T(9), "k", "x"), store->Put("k", T(9), "k", "x"),
                 store->Delete("b", T(9), "k")}) {
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsWrongLock()) << r.status().ToString();
    EXPECT_EQ(BoundLock(r.status()), "a");
    EXPECT_NE(r.status().message().find("delete it under that lock"), std::string::npos);
  }
  // Nothing changed: neither the object nor a fence of the named locks.
  EXPECT_EQ(store->Get("k")->value, "first");
  EXPECT_EQ(store->Get("k")->version, 1);
  EXPECT_FALSE(store->Highest("b")->has_value());
  EXPECT_FALSE(store->Highest("k")->has_value());
  EXPECT_EQ(store->Stats().refused(StatusCode::kWrongLock), 3u);
  auto h = History(*store);
  ASSERT_EQ(h.size(), 4u);
  for (int i = 1; i < 4; ++i) {
    EXPECT_FALSE(h[i].accepted);
    EXPECT_EQ(h[i].reason, "wrong_lock");
  }
  EXPECT_EQ(h[0].reason, "");
}

TEST_P(StoreRulesEngineTest, DeletingUnderItsLockFreesTheKey) {
  auto store = Open();
  ASSERT_TRUE(store->Put("a", T(5), "k", "v").ok());
  ASSERT_TRUE(store->Delete("a", T(5), "k").ok());
  auto r = store->Put("b", T(1), "k", "mine now");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(store->Get("k")->lock, "b");
  EXPECT_TRUE(store->Put("a", T(6), "k", "x").status().IsWrongLock());
}

TEST_P(StoreRulesEngineTest, LockForBindsPrefixesBeforeAnyWriteLongestFirst) {
  auto store = Open({.lock_for = {{"orders/", "orders"}, {"orders/vip/", "vip"}}});
  auto r = store->Put("orders/1", T(1), "orders/1", "v");
  ASSERT_TRUE(r.status().IsWrongLock()) << r.status().ToString();
  EXPECT_EQ(BoundLock(r.status()), "orders");
  EXPECT_NE(r.status().message().find("lock_for"), std::string::npos);
  EXPECT_TRUE(store->Put("orders", T(1), "orders/1", "v").ok());
  EXPECT_EQ(BoundLock(store->Put("orders", T(1), "orders/vip/1", "v").status()), "vip");
  EXPECT_TRUE(store->Put("vip", T(1), "orders/vip/1", "v").ok());
  EXPECT_TRUE(store->Delete("x", T(1), "orders/absent").status().IsWrongLock());
  EXPECT_TRUE(store->Put("anything", T(1), "other", "v").ok());
  EXPECT_FALSE(store->Highest("orders/1")->has_value());
}

TEST_F(StoreRulesTest, LockForWithAnInvalidLockFailsToOpen) {
  auto s = FencedStore::Open({.path = dir_.File("s.db"), .lock_for = {{"p/", ""}}});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsInvalidArgument());
  EXPECT_NE(s.status().message().find("lock_for"), std::string::npos) << s.status().ToString();
}

TEST_P(StoreRulesEngineTest, FenceBelongsToTheServiceOfItsFirstToken) {
  auto store = Open();
  ASSERT_TRUE(store->Write(Put("lock", 5, "k", "redis:aaaa")).ok());
  auto r = store->Write(Put("lock", 900, "k", "etcd:bbbb"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsWrongService()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("redis:aaaa"), std::string::npos);
  // Refused: the fence did not move and stays bound.
  auto fence = store->Fence("lock");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->highest, T(5));
  EXPECT_EQ((*fence)->service, "redis:aaaa");
  EXPECT_EQ(History(*store).back().reason, "wrong_service");
  EXPECT_EQ(store->Stats().refused(StatusCode::kWrongService), 1u);
  // A write without a service is judged by its token alone.
  EXPECT_TRUE(store->Write(Put("lock", 6, "k")).ok());
  EXPECT_TRUE(store->Write(Put("lock", 5, "k")).status().IsStaleToken());
  EXPECT_TRUE(store->Write(Put("lock", 7, "k", "redis:aaaa")).ok());
  EXPECT_EQ(store->Highest("lock")->value(), T(7));
}

// --no-fencing (the demo's control arm) accepts every write: a token from another lock service
// (Redis restarted empty) lands too, so the lost update it allows can be shown.
TEST_P(StoreRulesEngineTest, UnguardedStoreAcceptsAWriteFromAnotherLockService) {
  auto store = Open({.unguarded = true});
  ASSERT_TRUE(store->Write(Put("lock", 5, "k", "redis:aaaa")).ok());
  auto r = store->Write(Put("lock", 1, "k", "redis:bbbb"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto fence = store->Fence("lock");
  ASSERT_TRUE(fence.ok() && fence->has_value());
  EXPECT_EQ((*fence)->highest, T(5));
  EXPECT_EQ((*fence)->service, "redis:aaaa");
}

TEST_P(StoreRulesEngineTest, UnboundFenceIsBoundByTheFirstAcceptedWriteNamingAService) {
  auto store = Open();
  ASSERT_TRUE(store->Write(Put("lock", 5, "k")).ok());
  EXPECT_EQ((*store->Fence("lock"))->service, "");
  // A refused write binds nothing.
  ASSERT_TRUE(store->Write(Put("lock", 4, "k", "sqlite:1111")).status().IsStaleToken());
  EXPECT_EQ((*store->Fence("lock"))->service, "");
  ASSERT_TRUE(store->Write(Put("lock", 5, "k", "sqlite:2222")).ok());
  EXPECT_EQ((*store->Fence("lock"))->service, "sqlite:2222");
  EXPECT_TRUE(store->Write(Put("lock", 6, "k", "sqlite:1111")).status().IsWrongService());
}

TEST_P(StoreRulesEngineTest, RequireServiceRefusesWritesWithoutOne) {
  auto store = Open({.require_service = true});
  EXPECT_TRUE(store->requires_service());
  auto r = store->Write(Put("lock", 1, "k"));
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("Fencing-Service"), std::string::npos);
  EXPECT_FALSE(store->Highest("lock")->has_value());
  EXPECT_TRUE(History(*store).empty());
  EXPECT_TRUE(store->Write(Put("lock", 1, "k", "etcd:abc")).ok());
}

TEST_P(StoreRulesEngineTest, MalformedServiceIdIsRefused) {
  auto store = Open();
  for (const std::string& bad :
       std::vector<std::string>{"a b", "x\r\ny", std::string(129, 'a'), "caf\xc3\xa9"}) {
    EXPECT_TRUE(store->Write(Put("lock", 1, "k", bad)).status().IsInvalidArgument()) << bad;
  }
  EXPECT_FALSE(store->Highest("lock")->has_value());
}

TEST_P(StoreRulesEngineTest, HistoryCarriesReasonsAndPrincipals) {
  auto store = Open();
  ASSERT_TRUE(store->Write(Put("lock", 5, "k", "", "alice")).ok());
  ASSERT_FALSE(store->Write(Put("lock", 4, "k", "", "mallory")).ok());
  auto h = History(*store);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].principal, "alice");
  EXPECT_EQ(h[0].reason, "");
  EXPECT_EQ(h[1].principal, "mallory");
  EXPECT_EQ(h[1].reason, "stale_token");
  EXPECT_EQ(h[1].highest, 5);
}

TEST_P(StoreRulesEngineTest, SetFenceMovesTheFenceDownAndUpAndIsRecorded) {
  auto store = Open();
  ASSERT_TRUE(store->Write(Put("lock", 1000, "k", "redis:aaaa")).ok());
  // Down: a fence poisoned by a token far ahead is recovered.
  auto down = store->SetFence("lock", T(3), "admin", false);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->op, "set_fence");
  EXPECT_EQ(down->principal, "admin");
  EXPECT_EQ(down->highest, 3);
  EXPECT_TRUE(down->accepted);
  EXPECT_EQ(store->Highest("lock")->value(), T(3));
  EXPECT_EQ((*store->Fence("lock"))->service, "redis:aaaa");  // still bound
  EXPECT_TRUE(store->Write(Put("lock", 4, "k", "redis:aaaa")).ok());
  // Up, unbinding the service.
  auto up = store->SetFence("lock", T(50), "root", true);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ((*store->Fence("lock"))->service, "");
  EXPECT_TRUE(store->Write(Put("lock", 49, "k")).status().IsStaleToken());
  EXPECT_TRUE(store->Write(Put("lock", 50, "k", "etcd:bbbb")).ok());
  // An absent fence is created.
  ASSERT_TRUE(store->SetFence("new", T(7), "admin", false).ok());
  EXPECT_EQ(store->Highest("new")->value(), T(7));
  auto h = History(*store);
  std::vector<Decision> admin;
  for (const auto& d : h) {
    if (d.op == "set_fence") admin.push_back(d);
  }
  ASSERT_EQ(admin.size(), 3u);
  EXPECT_EQ(admin[0].seq, down->seq);
  EXPECT_EQ(admin[0].time, down->time);
  EXPECT_EQ(admin[0].highest, 3);
  EXPECT_EQ(admin[0].principal, "admin");
  EXPECT_EQ(admin[1].highest, 50);
  EXPECT_EQ(admin[1].principal, "root");
  EXPECT_EQ(admin[2].lock, "new");
  EXPECT_TRUE(store->SetFence("", T(1), "admin", false).status().IsInvalidArgument());
}

// A store file as fencekit wrote it with schema version 1.
void WriteSchemaV1Store(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql =
      "PRAGMA journal_mode=WAL;"
      "CREATE TABLE fences(lock BLOB PRIMARY KEY NOT NULL,"
      "  highest INTEGER NOT NULL CHECK (highest >= 1)) WITHOUT ROWID;"
      "CREATE TABLE objects(key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL,"
      "  lock BLOB NOT NULL, token INTEGER NOT NULL, version INTEGER NOT NULL);"
      "CREATE TABLE history(seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL,"
      "  op TEXT NOT NULL, lock BLOB NOT NULL, token INTEGER NOT NULL, key BLOB NOT NULL,"
      "  accepted INTEGER NOT NULL, highest INTEGER NOT NULL);"
      "INSERT INTO fences VALUES(CAST('lock' AS BLOB), 5);"
      "INSERT INTO objects VALUES(CAST('k' AS BLOB), CAST('old' AS BLOB), CAST('lock' AS BLOB),"
      "  5, 3);"
      "INSERT INTO history VALUES(1, 1000, 'put', CAST('lock' AS BLOB), 5, CAST('k' AS BLOB),"
      "  1, 5);"
      "PRAGMA application_id=1178947139;"  // 'FENC'
      "PRAGMA user_version=1;";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST_F(StoreRulesTest, MigratesASchemaVersion1Store) {
  std::string path = dir_.File("v1.db");
  WriteSchemaV1Store(path);
  {
    auto store = Open({.path = path});
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->Highest("lock")->value(), T(5));
    EXPECT_EQ(store->Get("k")->value, "old");
    auto h = History(*store);
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].reason, "");
    EXPECT_EQ(h[0].principal, "");
    EXPECT_EQ((*store->Fence("lock"))->service, "");
    // The old key keeps its lock; the old fence is bound by its first write naming a service.
    EXPECT_TRUE(store->Put("other", T(9), "k", "x").status().IsWrongLock());
    EXPECT_TRUE(store->Write(Put("lock", 4, "k", "", "bob")).status().IsStaleToken());
    auto w = store->Write(Put("lock", 6, "k", "redis:0123"));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(w->version, 4);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 4);
  sqlite3_finalize(st);
  sqlite3_close(db);
  auto store = Open({.path = path});  // a migrated store opens as it is
  EXPECT_EQ((*store->Fence("lock"))->service, "redis:0123");
  auto h = History(*store);
  ASSERT_EQ(h.size(), 4u);
  // The old history's row, then the new decisions (a row each: a commit each), in seq order.
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i].seq, static_cast<std::int64_t>(i + 1));
  EXPECT_EQ(h[0].op, "put");
  EXPECT_EQ(h[0].key, "k");
  EXPECT_EQ(h[0].time, std::chrono::system_clock::time_point(std::chrono::milliseconds(1000)));
  EXPECT_FALSE(h[1].accepted);  // wrong lock
  EXPECT_EQ(h[1].lock, "other");
  EXPECT_EQ(h[2].reason, "stale_token");
  EXPECT_EQ(h[2].principal, "bob");
  EXPECT_EQ(h[2].highest, 5);
  EXPECT_TRUE(h[3].accepted);
  EXPECT_EQ(h[3].token, 6);
  // A limit takes the newest, across both tables.
  auto last_two = store->History(2);
  ASSERT_TRUE(last_two.ok());
  ASSERT_EQ(last_two->size(), 2u);
  EXPECT_EQ((*last_two)[0].seq, 3);
  auto four = store->History(4);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->front().seq, 1);
}

}  // namespace
}  // namespace fencekit
