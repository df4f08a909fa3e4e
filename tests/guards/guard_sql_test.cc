// The guard as SQL in users' own databases (fencedstore/sql/), on a real PostgreSQL server and
// a real SQLite file: a stale token's transaction fails and no update is lost, also when two
// holders' transactions interleave.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::ReadWholeFile;
using testing::TempDir;
using testing::WaitFor;

// One libpq connection; Exec returns the SQLSTATE of an error ("" on success) and the first
// value of the first row in *value.
class Pg {
 public:
  explicit Pg(const std::string& uri) : conn_(PQconnectdb(uri.c_str())) {}
  ~Pg() { PQfinish(conn_); }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  std::string error() const { return PQerrorMessage(conn_); }

  std::string Exec(const std::string& sql, std::string* value = nullptr) {
    return Take(PQexec(conn_, sql.c_str()), value);
  }
  // Sends `sql` (one or more statements) without waiting; Finish() waits for the answers and
  // returns the first error's SQLSTATE ("" when every statement succeeded).
  bool Send(const std::string& sql) { return PQsendQuery(conn_, sql.c_str()) == 1; }
  std::string Finish() {
    std::string state;
    while (PGresult* r = PQgetResult(conn_)) {
      std::string s = Take(r, nullptr);
      if (state.empty()) state = s;
    }
    return state;
  }
  int BackendPid() const { return PQbackendPID(conn_); }

 private:
  std::string Take(PGresult* r, std::string* value) {
    std::string state;
    auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      state = s != nullptr ? s : "?????";
      last_message_ = PQresultErrorMessage(r);
    } else if (value != nullptr && PQntuples(r) > 0) {
      *value = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return state;
  }

 public:
  std::string last_message_;

 private:
  PGconn* conn_;
};

class PostgresGuardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    uri_ = new std::string(testing::NewPostgresDatabase());
    ASSERT_FALSE(uri_->empty());
    Pg admin(*uri_);
    ASSERT_TRUE(admin.ok()) << admin.error();
    ASSERT_EQ(admin.Exec(ReadWholeFile(std::string(GUARD_SQL_DIR) + "/postgresql-guard.sql")), "")
        << admin.last_message_;
    // Installing twice is harmless (a migration may run it again).
    ASSERT_EQ(admin.Exec(ReadWholeFile(std::string(GUARD_SQL_DIR) + "/postgresql-guard.sql")), "")
        << admin.last_message_;
    ASSERT_EQ(admin.Exec("CREATE TABLE orders(id int PRIMARY KEY, status text, by_token bigint)"),
              "")
        << admin.last_message_;
  }
  static void TearDownTestSuite() {
    delete uri_;
    uri_ = nullptr;
  }

  std::unique_ptr<Pg> Connect() {
    auto c = std::make_unique<Pg>(*uri_);
    EXPECT_TRUE(c->ok()) << c->error();
    return c;
  }

  // True once the session `pid` waits for a lock (seen from another connection).
  bool WaitsForALock(Pg& observer, int pid) {
    return WaitFor([&] {
      std::string waiting;
      observer.Exec("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                        " AND wait_event_type = 'Lock'",
                    &waiting);
      return waiting == "1";
    });
  }

  static std::string* uri_;  // a database of its own on the shared PostgreSQL
};
std::string* PostgresGuardTest::uri_ = nullptr;

TEST_F(PostgresGuardTest, AdvancesThenRefusesALowerTokenWithSqlstateP0001AndAFenceMessage) {
  auto c = Connect();
  std::string v;
  EXPECT_EQ(c->Exec("SELECT fencekit_advance('L', 10)", &v), "");
  EXPECT_EQ(v, "10");
  EXPECT_EQ(c->Exec("SELECT fencekit_advance('L', 5)"), "P0001");
  EXPECT_NE(c->last_message_.find("FENCE stale token 5 for lock \"L\": the highest is 10"),
            std::string::npos)
      << c->last_message_;
  EXPECT_EQ(c->Exec("SELECT fencekit_advance('L', 10)"), "");  // one holder, many writes
  EXPECT_EQ(c->Exec("SELECT fencekit_advance('L', 0)"), "22023");
  EXPECT_EQ(c->Exec("SELECT fencekit_advance('', 3)"), "22023");
  c->Exec("SELECT highest FROM fencekit_fences WHERE lock = 'L'", &v);
  EXPECT_EQ(v, "10");
}

// Kleppmann's case: the new holder (34) commits while the old one (33) is paused; the old one
// resumes and its whole transaction fails.
TEST_F(PostgresGuardTest, APausedHoldersLaterTransactionFailsAndItsWriteIsNotApplied) {
  auto a = Connect(), b = Connect();
  ASSERT_EQ(a->Exec("INSERT INTO orders VALUES (1, 'new', 0)"), "");
  ASSERT_EQ(b->Exec("BEGIN"), "");
  ASSERT_EQ(b->Exec("SELECT fencekit_advance('order-1', 34)"), "");
  ASSERT_EQ(b->Exec("UPDATE orders SET status = 'shipped', by_token = 34 WHERE id = 1"), "");
  ASSERT_EQ(b->Exec("COMMIT"), "");
  ASSERT_EQ(a->Exec("BEGIN"), "");
  EXPECT_EQ(a->Exec("SELECT fencekit_advance('order-1', 33)"), "P0001");
  EXPECT_EQ(a->Exec("UPDATE orders SET status = 'cancelled', by_token = 33 WHERE id = 1"),
            "25P02");  // the transaction is aborted: nothing more runs in it
  ASSERT_EQ(a->Exec("ROLLBACK"), "");
  std::string status;
  a->Exec("SELECT status || ' by ' || by_token FROM orders WHERE id = 1", &status);
  EXPECT_EQ(status, "shipped by 34");
}

// Two holders' transactions interleave: the later one waits on the fence row, then is judged
// against what the earlier one committed.
TEST_F(PostgresGuardTest, InterleavedTransactionsAreJudgedInCommitOrder) {
  auto a = Connect(), b = Connect(), observer = Connect();
  ASSERT_EQ(a->Exec("INSERT INTO orders VALUES (2, 'new', 0)"), "");
  for (auto [later, expect] : {std::pair{39, "P0001"}, std::pair{41, ""}}) {
    SCOPED_TRACE("later token " + std::to_string(later));
    ASSERT_EQ(a->Exec("UPDATE fencekit_fences SET highest = 1 WHERE lock = 'order-2'"), "");
    ASSERT_EQ(a->Exec("BEGIN"), "");
    ASSERT_EQ(a->Exec("SELECT fencekit_advance('order-2', 40)"), "");
    ASSERT_EQ(a->Exec("UPDATE orders SET status = 'by 40', by_token = 40 WHERE id = 2"), "");
    ASSERT_TRUE(b->Send("BEGIN; SELECT fencekit_advance('order-2', " + std::to_string(later) +
                        "); UPDATE orders SET status = 'by " + std::to_string(later) +
                        "', by_token = " + std::to_string(later) + " WHERE id = 2"));
    ASSERT_TRUE(WaitsForALock(*observer, b->BackendPid()));
    ASSERT_EQ(a->Exec("COMMIT"), "");
    std::string state = b->Finish();
    EXPECT_EQ(state, expect) << b->last_message_;
    ASSERT_EQ(b->Exec(state.empty() ? "COMMIT" : "ROLLBACK"), "");
    std::string by;
    a->Exec("SELECT by_token FROM orders WHERE id = 2", &by);
    EXPECT_EQ(by, state.empty() ? std::to_string(later) : "40");
  }
}

// Two first writes of a new lock at once: the later is judged against the row the earlier
// inserted.
TEST_F(PostgresGuardTest, ConcurrentFirstAdvancesOfANewLockAreSerialised) {
  auto a = Connect(), b = Connect(), observer = Connect();
  ASSERT_EQ(a->Exec("BEGIN"), "");
  ASSERT_EQ(a->Exec("SELECT fencekit_advance('fresh', 5)"), "");
  ASSERT_TRUE(b->Send("SELECT fencekit_advance('fresh', 3)"));
  ASSERT_TRUE(WaitsForALock(*observer, b->BackendPid()));
  ASSERT_EQ(a->Exec("COMMIT"), "");
  EXPECT_EQ(b->Finish(), "P0001") << b->last_message_;
}

using SqliteDb = std::unique_ptr<sqlite3, decltype(&sqlite3_close)>;

// A new database file in `dir` with the guard installed (null after a failure, which fails the
// test).
SqliteDb OpenWithGuard(const TempDir& dir) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(dir.File("app.db").c_str(), &db), SQLITE_OK);
  SqliteDb owned(db, sqlite3_close);
  const std::string schema = ReadWholeFile(std::string(GUARD_SQL_DIR) + "/sqlite-guard.sql");
  EXPECT_EQ(sqlite3_exec(db, schema.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  return owned;
}

// The SQLite recipe: INSERT INTO the guard's view inside BEGIN IMMEDIATE; a stale token fails
// with SQLITE_CONSTRAINT "FENCE stale token", and the transaction is rolled back.
TEST(SqliteGuardTest, TheRecipeAdvancesOrChangesNothing) {
  TempDir dir;
  SqliteDb owned = OpenWithGuard(dir);
  sqlite3* db = owned.get();
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE orders(id INTEGER PRIMARY KEY, by_token INTEGER);"
                         "INSERT INTO orders VALUES (1, 0);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  // Returns true when the write was applied, false when the token was stale (rolled back).
  auto guarded_write = [&](int token) {
    EXPECT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    std::string advance = "INSERT INTO fencekit_advance(lock, token) VALUES('order-1', " +
                          std::to_string(token) + ")";
    if (sqlite3_exec(db, advance.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      EXPECT_EQ(sqlite3_errcode(db), SQLITE_CONSTRAINT);
      EXPECT_STREQ(sqlite3_errmsg(db), "FENCE stale token");
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return false;
    }
    std::string write = "UPDATE orders SET by_token = " + std::to_string(token) + " WHERE id = 1";
    EXPECT_EQ(sqlite3_exec(db, write.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    return true;
  };
  EXPECT_TRUE(guarded_write(34));
  EXPECT_FALSE(guarded_write(33));
  EXPECT_TRUE(guarded_write(34));
  EXPECT_TRUE(guarded_write(35));
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT by_token FROM orders WHERE id = 1", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 35);
  sqlite3_finalize(st);
}

// Text stored as a fence used to wedge it for good (SQLite orders text above every number):
// the table refuses anything but an integer, whoever writes it, and the old upsert recipe is
// refused with it.
TEST(SqliteGuardTest, NoWriterCanStoreAFenceThatIsNotAnInteger) {
  TempDir dir;
  SqliteDb owned = OpenWithGuard(dir);
  sqlite3* db = owned.get();
  for (const char* token : {"'abc'", "''", "'0x10'", "x'07'", "100.5", "9223372036854775808"}) {
    SCOPED_TRACE(token);
    const std::string upsert =
        std::string("INSERT INTO fencekit_fences(lock, highest) VALUES('r', ") + token +
        ") ON CONFLICT(lock) DO UPDATE SET highest = excluded.highest "
        "WHERE fencekit_fences.highest <= excluded.highest";
    EXPECT_EQ(sqlite3_exec(db, upsert.c_str(), nullptr, nullptr, nullptr), SQLITE_CONSTRAINT);
  }
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO fencekit_advance VALUES('r', 5)", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "INSERT INTO fencekit_advance VALUES('r', 4)", nullptr, nullptr,
                         nullptr),
            SQLITE_CONSTRAINT);
  EXPECT_EQ(sqlite3_exec(db, "INSERT INTO fencekit_advance VALUES('r', 6)", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
}

}  // namespace
}  // namespace fencekit
