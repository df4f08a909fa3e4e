// The SQLite engine's fences (engine.h): whether a write's token passes its lock's fence, which
// it then moves or creates, and fence administration in a transaction of its own.
#include <sqlite3.h>

#include <string>

#include "refusals.h"
#include "sqlite/engine.h"

namespace fencekit::fencedstore {

using sqlite::Stmt;

namespace {

// SQL NULL for an empty text: a write without a service or a principal stores NULL.
void BindTextOrNull(Stmt& st, int i, std::string_view text) {
  st.BindText(i, text.empty() ? std::string_view() : text);
}

}  // namespace

// Advances the fence iff the token is new enough, of the fence's service, and (under verify)
// confirmed when it moves the fence up; or creates it. Decides the write again from the top
// when the verifier has its answer already.
Status SqliteEngine::PassFence(Pending& p, std::size_t i, Verifier* verifier,
                               std::string_view service, bool verified, WriteReceipt* receipt,
                               bool* through) {
  sqlite3* db = db_.get();
  const WriteRequest& w = p.writes[i];
  advance_fence_.BindBlob(1, w.lock);
  advance_fence_.BindInt(2, w.token.value());
  BindTextOrNull(advance_fence_, 3, service);
  if (options_.verify && !options_.unguarded) advance_fence_.BindInt(4, verified ? 1 : 0);
  int rc = advance_fence_.Step();
  advance_fence_.Reset();
  if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "checking the fence");
  const bool accepted = sqlite3_changes(db) == 1;
  if (!accepted || options_.unguarded) {
    bool exists = false;
    std::string fence_service;
    if (auto s = ReadFence(w.lock, &exists, &p.highest, &fence_service); !s.ok()) return s;
    if (!accepted && exists) {
      if (!service.empty() && !fence_service.empty() && fence_service != service) {
        return Refuse(p, FenceServiceStatus(p, fence_service, service));
      }
      if (w.token.value() < p.highest || (options_.strict && w.token.value() == p.highest) ||
          options_.unguarded) {
        return Refuse(p, StaleTokenStatus(p, p.highest, options_.strict));
      }
    }
    if (!accepted && (exists || (verifier != nullptr && !verified && !options_.unguarded))) {
      // The token would move the fence up (or create it) and the lock service has not confirmed
      // it yet.
      p.highest = exists ? p.highest : 0;
      if (verifier == nullptr) {  // unreachable: without verify the fence takes such a token
        p.outcome = Outcome::kFailed;
        p.result = Status::Internal("the fence refused a token above it; nothing was written");
        return Status::Ok();
      }
      if (p.verdict == nullptr) {
        p.verdict = verifier->Answer(w.lock, w.token);
        if (p.verdict != nullptr) return Decide(p, i, verifier, receipt);  // from the top
        p.outcome = Outcome::kDeferred;  // not recorded: it comes back with the answer
        return Status::Ok();
      }
      if (!p.verdict->ok()) {  // fail closed: nothing changed, nothing recorded
        p.outcome = Outcome::kFailed;
        p.result = p.verdict->status();
        return Status::Ok();
      }
      return Refuse(p, UnverifiedStatus(p));
    }
    if (!accepted) {  // the lock's first write
      insert_fence_.BindBlob(1, w.lock);
      insert_fence_.BindInt(2, w.token.value());
      BindTextOrNull(insert_fence_, 3, service);
      insert_fence_.BindInt(4, verified ? 1 : 0);
      rc = insert_fence_.Step();
      insert_fence_.Reset();
      if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "creating the fence");
      p.highest = w.token.value();
    }
  }
  *through = true;
  return Status::Ok();
}

Status SqliteEngine::Refuse(Pending& p, Status refusal) {
  p.outcome = Outcome::kRefused;
  p.result = std::move(refusal);
  return Status::Ok();
}

Status SqliteEngine::ReadFence(const std::string& lock, bool* exists, std::int64_t* highest,
                               std::string* service) {
  sqlite::ResetOnExit reset(read_fence_);
  read_fence_.BindBlob(1, lock);
  int rc = read_fence_.Step();
  *exists = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) {
    *highest = read_fence_.ColumnInt(0);
    *service = read_fence_.ColumnBytes(1);
  } else if (rc != SQLITE_DONE) {
    return sqlite::Error(db_.get(), rc, "reading the fence");
  }
  return Status::Ok();
}

Result<Decision> SqliteEngine::SetFence(const AdminOp& op, std::int64_t now_ms) {
  sqlite3* db = db_.get();
  Decision d = SetFenceDecision(op, now_ms);
  if (auto s = RecoverIfSuspect(); !s.ok()) return s;
  auto txn = sqlite::Transaction::Begin(txn_);
  Status failure = txn.status();
  if (failure.ok()) {
    sqlite::ResetOnExit reset(set_fence_);
    set_fence_.BindBlob(1, op.lock);
    set_fence_.BindInt(2, op.highest.value());
    set_fence_.BindInt(3, op.unbind ? 1 : 0);
    int rc = set_fence_.Step();
    if (rc != SQLITE_DONE) failure = sqlite::Error(db, rc, "setting the fence");
  }
  run_.Clear();
  if (failure.ok()) {
    failure = AddToRun(d.op, op.lock, d.token, "", true, d.highest, "", op.principal, &d.seq);
  }
  if (failure.ok()) failure = InsertRun(now_ms, d.seq);
  bool at_commit = false;
  if (failure.ok()) {
    failure = txn->Commit();
    at_commit = !failure.ok();  // as in CommitBatch: the WAL may hold it whole
  }
  if (!failure.ok()) {
    if (txn.ok()) txn->Rollback();
    suspect_ = failure.message();
    Status s = Status::IoError(
        (at_commit ? "the fence may or may not have been set: " : "the fence was not set: ") +
        failure.message() + ". Read it, or set it again");
    return failure.IsUnavailable() ? Status::Unavailable(s.message()) : s;
  }
  return d;
}

}  // namespace fencekit::fencedstore
