// What is particular to the PostgreSQL engine, on a real PostgreSQL server: several stores on one
// database, a lost or stalled connection, the history's runs, the schema's ownership, and
// secrets kept out of messages. (The rules themselves run on both engines in fencedstore_*_test;
// the schema's migrations in pg_schema_test.cc.)
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "fencedstore/pg_open_batch.h"
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

// The backends of fencekit's connections (application_name "fencekit") to the database at
// `uri`: the server is shared with other tests' databases.
std::vector<std::string> StoreBackends(const std::string& uri) {
  auto pids = QuerySql(uri,
                       "SELECT pid FROM pg_stat_activity WHERE application_name = 'fencekit' "
                       "AND pid <> pg_backend_pid() AND datname = current_database()");
  EXPECT_TRUE(pids.ok()) << pids.status().ToString();
  return pids.ok() ? *pids : std::vector<std::string>{};
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

// Each store's writer sees another store writing to its database (and then lingers for larger
// transactions, StoreOptions::shared_linger), and stops seeing it once that store is gone.
TEST(PostgresStoreTest, AStoreSeesAnotherStoreWritingToItsDatabaseOnlyWhileItWrites) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto a = Open({.path = db});
  auto b = Open({.path = db});
  ASSERT_TRUE(a && b);
  // Batches of two writes: the writer looks (every 250ms) after a transaction of several.
  int n = 0;
  auto write = [&](FencedStore& s) {
    BatchRequest batch{.lock = "L", .token = T(1)};
    for (int i = 0; i < 2; ++i) {
      batch.writes.push_back({.key = "k" + std::to_string(++n % 64), .value = "v"});
    }
    auto done = s.WriteBatch(std::move(batch));
    EXPECT_TRUE(done.ok()) << done.status().ToString();
  };
  EXPECT_FALSE(a->Stats().database_shared);
  ASSERT_TRUE(testing::WaitFor([&] {
    write(*a);
    write(*b);
    return a->Stats().database_shared && b->Stats().database_shared;
  }));
  b.reset();
  ASSERT_TRUE(testing::WaitFor([&] {
    write(*a);
    return !a->Stats().database_shared;
  }));
}

// Keeps `outstanding` writes in `store`: each answer submits the next one at once, on the writer
// thread, so writes are queued whenever a batch's COMMIT goes out and each batch can be sent
// behind the last commit. Stopping moves the store's `clock` on, so that a linger ends.
class SteadyLoad {
 public:
  SteadyLoad(FencedStore& store, FakeClock& clock, int outstanding) : store_(store), clock_(clock) {
    for (int i = 0; i < outstanding; ++i) Next(i);
  }
  ~SteadyLoad() {
    stop_ = true;
    EXPECT_TRUE(testing::WaitFor([&] {
      clock_.Advance(std::chrono::milliseconds(1));
      return in_flight_ == 0;
    }));
  }

 private:
  void Next(int i) {
    ++in_flight_;
    store_.Submit({.lock = "L", .token = T(1), .key = "k" + std::to_string(i), .value = "v"},
                  [this, i](Result<WriteReceipt> r) {
                    EXPECT_TRUE(r.ok()) << r.status().ToString();
                    if (r.ok() && !stop_) Next(i);
                    --in_flight_;
                  });
  }

  FencedStore& store_;
  FakeClock& clock_;
  std::atomic<bool> stop_{false};
  std::atomic<int> in_flight_{0};
};

// Under steady load every batch could go behind the last commit; the writer still looks for
// another store's writer once its last look is 250ms old on the store's clock, and not before.
TEST(PostgresStoreTest, AStoreUnderSteadyLoadLooksForAnotherWriterEvery250ms) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  FakeClock clock;
  StoreOptions options{.path = db};
  options.clock = &clock;
  options.max_batch = 8;  // the 32 writes fill a batch at once: a linger need not wait the clock
  auto a = Open(options);
  std::optional<SteadyLoad> load(std::in_place, *a, clock, 32);
  // a's first look, with nothing else writing, and then batches behind the commits.
  ASSERT_TRUE(testing::WaitFor([&] { return a->Stats().commits >= 20; }));
  EXPECT_FALSE(a->Stats().database_shared);
  auto b = Open({.path = db});
  std::atomic<bool> writing{true};
  std::thread b_writes([&] {
    for (int i = 0; writing; ++i) {
      BatchRequest batch{.lock = "L", .token = T(1)};
      batch.writes.push_back({.key = "b" + std::to_string(i % 64), .value = "v"});
      batch.writes.push_back({.key = "c" + std::to_string(i % 64), .value = "v"});
      auto done = b->WriteBatch(std::move(batch));
      EXPECT_TRUE(done.ok()) << done.status().ToString();
    }
  });
  // b writes (and sees a writing); a, whose clock stands still, does not look yet.
  EXPECT_TRUE(testing::WaitFor([&] { return b->Stats().database_shared; }));
  const std::uint64_t commits = a->Stats().commits;
  EXPECT_TRUE(testing::WaitFor([&] { return a->Stats().commits >= commits + 50; }));
  EXPECT_FALSE(a->Stats().database_shared);
  clock.Advance(std::chrono::milliseconds(250));
  EXPECT_TRUE(testing::WaitFor([&] { return a->Stats().database_shared; }));
  writing = false;
  b_writes.join();
  load.reset();
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

// A group commit's decisions are one row of fencekit.history_runs; the trim (every 64 commits)
// removes whole runs once their last decision is past the limit, and the history reads the
// rest in order.
TEST(PostgresStoreTest, TheHistorysRunsAreTrimmedToItsLimit) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto store = Open({.path = db, .history_limit = 100});
  constexpr int kRounds = 130, kWrites = 16;  // at least 130 commits: two trims or more
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::future<Result<WriteReceipt>>> writes;
    for (int i = 0; i < kWrites; ++i) {
      writes.push_back(std::async(std::launch::async, [&, i] {
        return store->Put("L", T(1), "k" + std::to_string(i), std::to_string(round));
      }));
    }
    for (auto& w : writes) ASSERT_TRUE(w.get().ok());
  }
  auto runs = QuerySql(db, "SELECT count(*) > 0 FROM fencekit.history_runs");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(*runs, std::vector<std::string>{"t"});
  auto all = store->History(100000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_GE(all->size(), 100u);
  EXPECT_LE(all->size(), 100u + 64u * kWrites) << "of " << kRounds * kWrites << " decisions";
  for (std::size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i - 1].seq, (*all)[i].seq);
  EXPECT_EQ(all->back().op, "put");
  EXPECT_TRUE(all->back().accepted);
}

TEST(PostgresStoreTest, WritesAtTheFencesTokenDoNotWaitForEachOthersCommits) {
  std::string db = testing::NewPostgresDatabase();
  ASSERT_FALSE(db.empty());
  auto a = Open({.path = db});
  ASSERT_TRUE(a && a->Put("L", T(5), "k1", "v1").ok());
  // Another fenced's batch at the fence's token, decided and not committed yet.
  testing::PgClient other(db);
  ASSERT_TRUE(other.ok()) << other.error();
  auto open = testing::WriteInAnOpenTransaction(other, 5, "k2", "v2");
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
