// sqlite::Transaction and sqlite::UseWal on real SQLite files in a temporary folder.
#include "sqlite/sqlite_util.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "sqlite/transaction.h"
#include "support/test_support.h"

namespace fencekit::sqlite {
namespace {

using fencekit::testing::TempDir;

class TransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = Open();
    ASSERT_TRUE(Exec(db_.get(), "CREATE TABLE t(x INTEGER)").ok());
    auto stmts = TxnStatements::Prepare(db_.get(), TxnMode::kImmediate, "test.db");
    ASSERT_TRUE(stmts.ok()) << stmts.status().ToString();
    stmts_ = std::move(stmts).value();
  }

  // A connection without a busy timeout: a lock conflict fails at once. The default rollback
  // journal (not WAL) makes a reader block a writer's COMMIT.
  Db Open() {
    sqlite3* raw = nullptr;
    int rc =
        sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    Db db(raw);
    EXPECT_EQ(rc, SQLITE_OK);
    return db;
  }

  // Rows in t, seen from a new connection.
  int Rows() {
    Db other = Open();
    auto count = Stmt::Prepare(other.get(), "SELECT count(*) FROM t");
    EXPECT_TRUE(count.ok());
    EXPECT_EQ(count->Step(), SQLITE_ROW);
    return static_cast<int>(count->ColumnInt(0));
  }

  TempDir dir_;
  std::string path_ = dir_.File("test.db");
  Db db_;
  TxnStatements stmts_;
};

TEST_F(TransactionTest, CommitPersistsTheWrites) {
  auto txn = Transaction::Begin(stmts_);
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  ASSERT_TRUE(Exec(db_.get(), "INSERT INTO t VALUES(1)").ok());
  EXPECT_TRUE(txn->Commit().ok());
  EXPECT_EQ(Rows(), 1);
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);  // no transaction left open
}

TEST_F(TransactionTest, DestructionWithoutCommitRollsBack) {
  {
    auto txn = Transaction::Begin(stmts_);
    ASSERT_TRUE(txn.ok()) << txn.status().ToString();
    ASSERT_TRUE(Exec(db_.get(), "INSERT INTO t VALUES(1)").ok());
    EXPECT_EQ(sqlite3_get_autocommit(db_.get()), 0);
  }
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);
  EXPECT_EQ(Rows(), 0);
  // The connection is usable for the next transaction.
  auto next = Transaction::Begin(stmts_);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(next->Commit().ok());
}

TEST_F(TransactionTest, CommitFailureIsReportedAndNothingPersists) {
  auto txn = Transaction::Begin(stmts_);
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  ASSERT_TRUE(Exec(db_.get(), "INSERT INTO t VALUES(1)").ok());
  // A reader in a transaction holds a shared lock, so the COMMIT cannot take the exclusive one.
  Db reader = Open();
  ASSERT_TRUE(Exec(reader.get(), "BEGIN; SELECT count(*) FROM t;").ok());

  Status s = txn->Commit();
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("committing a transaction on test.db"), std::string::npos)
      << s.message();
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);  // rolled back, not left open

  ASSERT_TRUE(Exec(reader.get(), "COMMIT").ok());
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(txn->Commit().ok());  // it has ended; a second commit is refused
}

TEST_F(TransactionTest, ImmediateBeginFailsWhileAnotherConnectionWrites) {
  Db writer = Open();
  ASSERT_TRUE(Exec(writer.get(), "BEGIN IMMEDIATE").ok());
  auto txn = Transaction::Begin(stmts_);
  ASSERT_FALSE(txn.ok());
  EXPECT_TRUE(txn.status().IsUnavailable()) << txn.status().ToString();
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);
}

TEST_F(TransactionTest, ExplicitRollbackDiscardsAndEndsTheTransaction) {
  auto txn = Transaction::Begin(stmts_);
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  ASSERT_TRUE(Exec(db_.get(), "INSERT INTO t VALUES(1)").ok());
  txn->Rollback();
  EXPECT_NE(sqlite3_get_autocommit(db_.get()), 0);
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(txn->Commit().ok());
}

// Two processes creating one database: while one converts the new file to WAL it holds the
// rollback journal's write lock, and SQLite answers the other's conversion SQLITE_BUSY at once,
// without a busy handler. UseWal tries again until the lock is free or max_wait has passed.
TEST(UseWalTest, TriesAgainWhileAnotherConnectionConvertsTheNewFile) {
  TempDir dir;
  std::string path = dir.File("new.db");
  auto open = [&] {
    sqlite3* raw = nullptr;
    EXPECT_EQ(
        sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
        SQLITE_OK);
    return Db(raw);
  };
  Db converting = open(), joining = open();
  ASSERT_TRUE(Exec(converting.get(), "BEGIN IMMEDIATE").ok());

  const auto began = std::chrono::steady_clock::now();
  Status held = UseWal(joining.get(), "new.db", std::chrono::milliseconds(150));
  EXPECT_TRUE(held.IsUnavailable()) << held.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(150))
      << "gave up before max_wait";
  EXPECT_NE(held.message().find("switching new.db to WAL mode"), std::string::npos)
      << held.message();

  ASSERT_TRUE(Exec(converting.get(), "COMMIT").ok());
  Status free = UseWal(joining.get(), "new.db");
  EXPECT_TRUE(free.ok()) << free.ToString();
  EXPECT_TRUE(UseWal(converting.get(), "new.db").ok()) << "the file is in WAL mode for both";
}

TEST(UseWalTest, AnInMemoryDatabaseCannotUseWal) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &raw), SQLITE_OK);
  Db db(raw);
  Status s = UseWal(db.get(), "the test database");
  EXPECT_TRUE(s.IsIoError()) << s.ToString();
  EXPECT_NE(s.message().find("cannot use WAL mode (journal_mode is memory)"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace fencekit::sqlite
