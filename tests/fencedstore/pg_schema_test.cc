// The PostgreSQL store's schema: migrations (once, from each earlier version), and a database
// that is not a store's or is a newer fencekit's.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "support/open_store.h"
#include "support/servers/pg_client.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::QuerySql;

constexpr auto T = testing::TokenOf;
constexpr auto Open = testing::OpenStore;

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
  EXPECT_EQ(*version, std::vector<std::string>{"3"});
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
      "DROP SEQUENCE fencekit.versions; DROP TABLE fencekit.history_runs; "
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
            std::vector<std::string>{"3"});
}

// Schema 3 records a call's decisions as one row of fencekit.history_runs; a version-2 store's
// history rows stay, and the history reads both in seq order.
TEST(PostgresStoreTest, MigratesASchemaVersion2StoreKeepingItsHistoryInOrder) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  ASSERT_TRUE(Open({.path = db}) != nullptr);
  auto v2 = QuerySql(db,
                     "DROP TABLE fencekit.history_runs; "
                     "INSERT INTO fencekit.history(time_ms, op, lock, token, key, accepted, "
                     "highest) VALUES (1, 'put', 'L', 1, 'old1', true, 1), "
                     "(2, 'put', 'L', 1, 'old2', true, 1); "
                     "UPDATE fencekit.schema_version SET version = 2");
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  auto store = Open({.path = db});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Put("L", T(2), "new1", "v").ok());                     // a run of one decision
  ASSERT_TRUE(store->SetFence("L", T(5), "admin", false).ok());             // a row
  EXPECT_TRUE(store->Put("L", T(3), "new2", "v").status().IsStaleToken());  // a run
  ASSERT_TRUE(store->Delete("L", T(5), "new1").ok());  // a row (fencekit.write)
  auto h = store->History(100);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::vector<std::string> seen;
  for (const Decision& d : *h) seen.push_back(d.op + " " + d.key);
  EXPECT_EQ(seen, (std::vector<std::string>{"put old1", "put old2", "put new1", "set_fence ",
                                            "put new2", "delete new1"}));
  for (std::size_t i = 1; i < h->size(); ++i) EXPECT_LT((*h)[i - 1].seq, (*h)[i].seq);
  EXPECT_EQ((*h)[4].reason, "stale_token");
  EXPECT_EQ((*h)[4].highest, 5);
  EXPECT_FALSE((*h)[4].accepted);
  // The latest three, from both tables.
  auto last = store->History(3);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 3u);
  EXPECT_EQ((*last)[0].op, "set_fence");
  EXPECT_EQ((*last)[2].key, "new1");
  EXPECT_EQ(QuerySql(db, "SELECT count(*) FROM fencekit.history_runs").value(),
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

}  // namespace
}  // namespace fencekit
