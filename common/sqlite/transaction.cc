#include "sqlite/transaction.h"

#include <utility>

namespace fencekit::sqlite {
namespace {

std::string Doing(const std::string& subject, const char* what) {
  return subject.empty() ? std::string(what) : std::string(what) + " on " + subject;
}

}  // namespace

Result<TxnStatements> TxnStatements::Prepare(sqlite3* db, TxnMode mode, std::string subject) {
  TxnStatements s;
  s.db_ = db;
  s.subject_ = std::move(subject);
  auto begin = Stmt::Prepare(db, mode == TxnMode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN");
  if (!begin.ok()) return begin.status();
  auto commit = Stmt::Prepare(db, "COMMIT");
  if (!commit.ok()) return commit.status();
  auto rollback = Stmt::Prepare(db, "ROLLBACK");
  if (!rollback.ok()) return rollback.status();
  s.begin_ = std::move(begin).value();
  s.commit_ = std::move(commit).value();
  s.rollback_ = std::move(rollback).value();
  return s;
}

Result<Transaction> Transaction::Begin(TxnStatements& stmts) {
  int rc = stmts.begin_.Step();
  if (rc != SQLITE_DONE) {
    Status failed = Error(stmts.db_, rc, Doing(stmts.subject_, "beginning a transaction"));
    stmts.begin_.Reset();
    return failed;
  }
  stmts.begin_.Reset();
  return Transaction(&stmts);
}

Transaction::Transaction(Transaction&& other) noexcept
    : stmts_(std::exchange(other.stmts_, nullptr)) {}

Status Transaction::Commit() {
  TxnStatements* s = std::exchange(stmts_, nullptr);
  if (s == nullptr) return Status::Internal("Commit() on a transaction that has already ended");
  int rc = s->commit_.Step();
  if (rc == SQLITE_DONE) {
    s->commit_.Reset();
    return Status::Ok();
  }
  Status failed = Error(s->db_, rc, Doing(s->subject_, "committing a transaction"));
  s->commit_.Reset();
  // A failed COMMIT (SQLITE_BUSY, a deferred constraint) may leave the transaction open.
  stmts_ = s;
  Rollback();
  return failed;
}

void Transaction::Rollback() {
  TxnStatements* s = std::exchange(stmts_, nullptr);
  // SQLite rolls back by itself after some errors (SQLITE_FULL, SQLITE_IOERR); ROLLBACK would
  // then fail with "no transaction is active".
  if (s == nullptr || sqlite3_get_autocommit(s->db_) != 0) return;
  s->rollback_.Step();
  s->rollback_.Reset();
}

}  // namespace fencekit::sqlite
