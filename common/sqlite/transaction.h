// An RAII SQLite transaction: begun when made, rolled back unless committed.
#pragma once

#include <sqlite3.h>

#include <string>

#include "fencekit/common/status.h"
#include "sqlite/sqlite_util.h"

namespace fencekit::sqlite {

enum class TxnMode {
  kDeferred,   // BEGIN: takes the write lock at the first write
  kImmediate,  // BEGIN IMMEDIATE: takes the write lock at once, so no later step is refused
               // for a lock another writer took in between
};

// The BEGIN, COMMIT and ROLLBACK statements of one connection, prepared once so that a hot path
// parses no SQL per transaction. Thread safety: one thread at a time, that of its connection.
class TxnStatements {
 public:
  TxnStatements() = default;
  // `subject` names the database in error messages ("" to leave it out).
  static Result<TxnStatements> Prepare(sqlite3* db, TxnMode mode, std::string subject = "");

 private:
  friend class Transaction;
  sqlite3* db_ = nullptr;
  Stmt begin_, commit_, rollback_;
  std::string subject_;
};

// One transaction on a connection. A constructor could not report a failed BEGIN, so Begin()
// is the constructor. Thread safety: one thread at a time, that of its connection.
class [[nodiscard]] Transaction {
 public:
  // Begins a transaction. REQUIRES: none is open on the connection; `stmts` outlives the
  // Transaction. Fails (kUnavailable when another connection holds the write lock past the
  // busy timeout, kIoError otherwise) with nothing begun.
  static Result<Transaction> Begin(TxnStatements& stmts);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  // Rolls back unless Commit() or Rollback() ended the transaction.
  ~Transaction() { Rollback(); }

  // Commits. On failure the transaction is rolled back (if SQLite has not done so already) and
  // the status says why: nothing it wrote may be reported as stored. Either way it has ended.
  Status Commit();
  // Ends the transaction without keeping its changes; does nothing once it has ended.
  void Rollback();

 private:
  explicit Transaction(TxnStatements* stmts) : stmts_(stmts) {}
  TxnStatements* stmts_;  // null once the transaction has ended
};

}  // namespace fencekit::sqlite
