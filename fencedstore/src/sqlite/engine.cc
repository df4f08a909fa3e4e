// The SQLite engine (engine.h): how a batch is decided and recorded inside the writer's
// transaction: the key's lock, the fence (engine_fence.cc), the object, the history
// (engine_history.cc).
#include "sqlite/engine.h"

#include <sqlite3.h>

#include <string>
#include <utility>

#include "refusals.h"
#include "sqlite/connection.h"

namespace fencekit::fencedstore {

using sqlite::Stmt;

Result<std::unique_ptr<Engine>> SqliteEngine::Make(const StoreOptions& options, sqlite::Db db,
                                                   sqlite::TxnStatements txn) {
  std::unique_ptr<SqliteEngine> e(new SqliteEngine(options));
  if (auto s = e->Prepare(std::move(db), std::move(txn)); !s.ok()) return s;
  return std::unique_ptr<Engine>(std::move(e));
}

Status SqliteEngine::Prepare(sqlite::Db db, sqlite::TxnStatements txn) {
  const StoreOptions& options = options_;
  auto* e = this;
  e->db_ = std::move(db);
  e->txn_ = std::move(txn);
  sqlite3* w = e->db_.get();
  // One statement checks the token, the service binding and (under verify) that a token moving
  // the fence up was confirmed, and moves the fence: ?1 lock, ?2 token, ?3 the write's service
  // (NULL when none: judged by its token alone; else it binds an unbound fence and must match a
  // bound one), ?4 whether the lock service confirmed the token.
  // No RETURNING on the hot path: SQLite materialises RETURNING rows in a temporary table
  // on every execution, which costs more than a second point lookup.
  const std::string service_ok = " AND (?3 IS NULL OR service IS NULL OR service = ?3)";
  std::string fence_sql;
  if (options.unguarded) {
    // Every write, whatever its token and its service: the demonstration's lost update.
    fence_sql =
        "UPDATE fences SET highest = max(highest, ?2), service = coalesce(service, ?3) "
        "WHERE lock = ?1";
  } else {
    // Under verify only a confirmed write binds the fence to a service: anyone may send the
    // fence's current token (GET /v1/fences shows it), and must not bind the fence with it.
    // `confirmed` says the lock service confirmed the fence's current token: under verify a
    // write at the fence needs no call only then. Any unconfirmed move (a write without verify,
    // fence administration) clears it, so a token set by hand or before verify was on is checked
    // once more.
    fence_sql = std::string("UPDATE fences SET highest = ?2, service = coalesce(service, ") +
                (options.verify ? "CASE WHEN ?4 THEN ?3 END" : "?3") + "), confirmed = CASE " +
                (options.verify ? "WHEN ?4 THEN 1 " : "") +
                "WHEN ?2 = highest THEN confirmed ELSE 0 END WHERE lock = ?1 AND ?2 " +
                (options.strict ? ">" : ">=") + " highest" + service_ok;
    if (options.verify) {
      fence_sql += options.strict ? " AND ?4" : " AND ((?2 = highest AND confirmed) OR ?4)";
    }
  }
  struct {
    Stmt* stmt;
    std::string sql;
  } stmts[] = {
      {&e->advance_fence_, fence_sql},
      {&e->read_fence_, "SELECT highest, service FROM fences WHERE lock = ?1"},
      {&e->insert_fence_,
       "INSERT INTO fences(lock, highest, service, confirmed) VALUES(?1, ?2, ?3, ?4)"},
      // A key stored already is rewritten by its rowid, read with it: one lookup in the table,
      // none in the key's index (which the write does not change).
      {&e->read_object_, "SELECT version, lock, rowid FROM objects WHERE key = ?1"},
      {&e->insert_object_,
       "INSERT INTO objects(key, value, lock, token, version) VALUES(?1, ?2, ?3, ?4, ?5)"},
      {&e->update_object_,
       "UPDATE objects SET value = ?2, lock = ?3, token = ?4, version = ?5 WHERE rowid = ?1"},
      {&e->delete_object_, "DELETE FROM objects WHERE key = ?1"},
      // A put to a key of the lock whose fence this transaction already passed at the token:
      // one statement, no read first (Decide's step 0).
      {&e->rewrite_object_,
       "UPDATE objects SET value = ?2, token = ?4, version = ?5 WHERE key = ?1 AND lock = ?3"},
      // A transaction's decisions, one row (history_run.h); their seqs follow the last one given,
      // in a run or in a row of the history table of schemas before 4.
      {&e->insert_run_,
       "INSERT INTO history_runs(last_seq, time_ms, decisions) VALUES(?1, ?2, ?3)"},
      {&e->read_last_seq_,
       "SELECT max(coalesce((SELECT max(last_seq) FROM history_runs), 0),"
       " coalesce((SELECT max(seq) FROM history), 0))"},
      // At most 4,096 seqs of the oldest per trim: a history far over its limit (a lower
      // --history than before) shrinks over several commits, not in one long delete. A run
      // goes whole, once its last decision is past the limit.
      {&e->trim_history_,
       "DELETE FROM history WHERE seq <= min(?1, (SELECT min(seq) FROM history) + 4095)"},
      {&e->trim_runs_,
       "DELETE FROM history_runs "
       "WHERE last_seq <= min(?1, (SELECT min(last_seq) FROM history_runs) + 4095)"},
      {&e->set_fence_,
       "INSERT INTO fences(lock, highest, service, confirmed) VALUES(?1, ?2, NULL, 0) "
       "ON CONFLICT(lock) DO UPDATE SET highest = excluded.highest, confirmed = 0, "
       "service = CASE WHEN ?3 THEN NULL ELSE service END"},
      // A batch, or a conditional write, is decided in a savepoint of its own, so that its
      // refusal undoes what its earlier writes did and nothing else of the group commit.
      {&e->savepoint_, "SAVEPOINT batch"},
      {&e->rollback_to_, "ROLLBACK TO batch"},
      {&e->release_, "RELEASE batch"},
      {&e->read_counter_, "SELECT value FROM counters WHERE name = 'version'"},
      {&e->write_counter_, "UPDATE counters SET value = ?1 WHERE name = 'version'"},
      // ProbeCommit's own row: a value that changes, so the page is written and synced.
      {&e->bump_probe_,
       "INSERT INTO counters(name, value) VALUES('probe', 1) "
       "ON CONFLICT(name) DO UPDATE SET value = value + 1"},
  };
  for (auto& [stmt, sql] : stmts) {
    auto st = Stmt::Prepare(w, sql);
    if (!st.ok()) return st.status();
    *stmt = std::move(st).value();
  }
  return Status::Ok();
}

Status SqliteEngine::Recover() {
  Close();
  auto db = OpenConnection(options_, false);
  if (!db.ok()) return db.status();
  auto txn = sqlite::TxnStatements::Prepare(db->get(), sqlite::TxnMode::kImmediate,
                                            "the store database \"" + options_.path + "\"");
  if (!txn.ok()) return txn.status();
  // The page cache of the failed connection is gone; what the new one reads must hold together.
  {
    auto check = Stmt::Prepare(db->get(), "PRAGMA quick_check");
    if (!check.ok()) return check.status();
    int rc = check->Step();
    if (rc != SQLITE_ROW) return sqlite::Error(db->get(), rc, "checking the database");
    if (check->ColumnBytes(0) != "ok") {
      return Status::IoError("the database fails its check (" + check->ColumnBytes(0) +
                             "); restore it from a backup");
    }
  }
  if (auto s = Prepare(std::move(db).value(), std::move(txn).value()); !s.ok()) return s;
  suspect_.clear();
  return Status::Ok();
}

// Decides and applies every write of `batch` in one transaction. On any storage error the
// transaction is rolled back and every write of the batch fails: nothing is acknowledged. One
// transaction at a time: SQLite's commit is this thread's own fsync, with nothing to overlap.
Status SqliteEngine::CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms,
                                 Verifier* verifier, const TakeNext& /*next*/) {
  if (auto s = RecoverIfSuspect(); !s.ok()) return s;
  Status failure = Status::Ok();
  passed_.Clear();
  run_.Clear();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) failure = txn.status();
  if (failure.ok()) {
    sqlite::ResetOnExit reset(read_counter_);
    int rc = read_counter_.Step();
    if (rc == SQLITE_ROW) {
      last_version_ = read_counter_.ColumnInt(0);
    } else {
      failure = sqlite::Error(db_.get(), rc, "reading the version counter");
    }
  }
  const std::int64_t first_version = last_version_;
  std::int64_t last_seq = 0;
  for (auto& p : batch) {
    if (!failure.ok()) break;
    failure = Apply(p, verifier, last_seq);
  }
  if (failure.ok() && last_version_ != first_version) {
    write_counter_.BindInt(1, last_version_);
    failure = Run(write_counter_, "writing the version counter");
  }
  if (failure.ok()) failure = InsertRun(now_ms, last_seq);
  if (failure.ok() && untrimmed_ >= 64 &&
      last_seq > static_cast<std::int64_t>(options_.history_limit)) {
    // Trimming every 64 records or more keeps the history bounded without a delete per commit.
    // Records, not batches: a client's batch records a decision per write.
    untrimmed_ = 0;
    const std::int64_t cut = last_seq - static_cast<std::int64_t>(options_.history_limit);
    trim_runs_.BindInt(1, cut);
    failure = Run(trim_runs_, "trimming the history");
    trim_history_.BindInt(1, cut);
    if (failure.ok()) failure = Run(trim_history_, "trimming the history");
  }
  bool at_commit = false;
  if (failure.ok()) {
    failure = txn->Commit();
    // The WAL may hold the batch's frames whole, though unsynced: a connection that recovers
    // the WAL (the next one to open it alone) takes them as committed.
    at_commit = !failure.ok();
  }
  if (failure.ok()) return Status::Ok();
  if (txn.ok()) txn->Rollback();
  suspect_ = failure.message();
  return BatchFailure(failure, at_commit);
}

// Counts the probes in a row of their own (SQLite leaves a page alone when a write would not
// change it), so the commit appends to the WAL and syncs it as a batch's would.
Status SqliteEngine::ProbeCommit() {
  if (auto s = RecoverIfSuspect(); !s.ok()) return s;
  auto txn = sqlite::Transaction::Begin(txn_);
  Status failure = txn.ok() ? Status::Ok() : txn.status();
  if (failure.ok()) failure = Run(bump_probe_, "writing the probe counter");
  if (failure.ok()) failure = txn->Commit();
  if (failure.ok()) return Status::Ok();
  if (txn.ok()) txn->Rollback();
  suspect_ = failure.message();
  return failure;
}

Status SqliteEngine::RecoverIfSuspect() {
  if (suspect_.empty()) return Status::Ok();
  if (auto s = Recover(); !s.ok()) {
    return BatchFailure(Status::Unavailable("the store's last commit failed (" + suspect_ +
                                            "), and the database could not be reopened and "
                                            "checked since: " +
                                            s.message()),
                        false);
  }
  ++recoveries_;
  return Status::Ok();
}

Status SqliteEngine::Run(Stmt& stmt, std::string_view doing) {
  sqlite::ResetOnExit reset(stmt);
  int rc = stmt.Step();
  return rc == SQLITE_DONE ? Status::Ok() : sqlite::Error(db_.get(), rc, doing);
}

Status SqliteEngine::Apply(Pending& p, Verifier* verifier, std::int64_t& last_seq) {
  const bool atomic = p.atomic();
  if (atomic) {
    if (auto s = Run(savepoint_, "opening a savepoint"); !s.ok()) return s;
  }
  std::vector<WriteReceipt> receipts;
  receipts.reserve(p.writes.size());
  for (std::size_t i = 0; i < p.writes.size(); ++i) {
    WriteReceipt receipt;
    if (auto s = Decide(p, i, verifier, &receipt); !s.ok()) return s;
    if (p.outcome != Outcome::kAccepted) break;
    receipts.push_back(std::move(receipt));
  }
  if (atomic) {
    if (p.outcome != Outcome::kAccepted) {
      passed_.Clear();  // the fences it moved are back where they were
      if (auto s = Run(rollback_to_, "undoing a refused batch"); !s.ok()) return s;
    }
    if (auto s = Run(release_, "closing a savepoint"); !s.ok()) return s;
  }
  if (p.outcome == Outcome::kAccepted) {
    for (const auto& w : p.writes) {
      if (auto s = Record(w, true, p.highest, StatusCode::kOk, last_seq); !s.ok()) return s;
    }
    p.result = std::move(receipts);
    return Status::Ok();
  }
  if (p.outcome != Outcome::kRefused) return Status::Ok();  // deferred or failed: unrecorded
  // Recorded with the fence as it stands once the refused writes are undone.
  bool exists = false;
  std::string service;
  p.highest = 0;
  if (auto s = ReadFence(p.grant().lock, &exists, &p.highest, &service); !s.ok()) return s;
  return Record(p.writes[p.culprit], false, p.highest, p.result.status().code(), last_seq);
}

Status SqliteEngine::Decide(Pending& p, std::size_t i, Verifier* verifier, WriteReceipt* receipt) {
  sqlite3* db = db_.get();
  // The write being decided: every refusal below names it (refusals.cc reads p.culprit).
  p.culprit = i;
  const WriteRequest& w = p.writes[i];
  const std::string* prefix_lock = p.prefix_lock(i);
  const bool verified = Verified(p);
  std::string_view service;
  if (Status mismatch = ResolveService(p, &service); !mismatch.ok()) {
    return Refuse(p, std::move(mismatch));
  }

  // 0. A put with nothing to check but the key's lock, once the fence let the lock through at
  // this token in this transaction: rewritten where the key is stored under the lock. Else (no
  // such key, or another lock's) decided from step 1 as any write.
  if (prefix_lock == nullptr && !w.if_version && w.kind == WriteRequest::Kind::kPut &&
      passed_.Passed(w.lock, w.token.value(), service)) {
    const std::int64_t next_version = last_version_ + 1;
    rewrite_object_.BindBlob(1, w.key);
    rewrite_object_.BindBlob(2, w.value);
    rewrite_object_.BindBlob(3, w.lock);
    rewrite_object_.BindInt(4, w.token.value());
    rewrite_object_.BindInt(5, next_version);
    int rc = rewrite_object_.Step();
    rewrite_object_.Reset();
    if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "writing the object");
    if (sqlite3_changes(db) == 1) {
      last_version_ = next_version;
      p.highest = w.token.value();
      p.outcome = Outcome::kAccepted;
      *receipt = WriteReceipt{w.key, w.lock, w.token, next_version, false};
      return Status::Ok();
    }
  }

  // 1. The key's lock: lock_for's for its prefix, else the lock of the write that created it.
  std::int64_t version = 0;  // 0: no such key
  std::int64_t rowid = 0;
  std::string key_lock;
  read_object_.BindBlob(1, w.key);
  int rc = read_object_.Step();
  if (rc == SQLITE_ROW) {
    version = read_object_.ColumnInt(0);
    if (prefix_lock == nullptr) key_lock = read_object_.ColumnBytes(1);
    rowid = read_object_.ColumnInt(2);
  }
  read_object_.Reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return sqlite::Error(db, rc, "reading the object");
  }
  if (prefix_lock != nullptr) key_lock = *prefix_lock;
  if (!key_lock.empty() && key_lock != w.lock) {
    return Refuse(p, WrongLockStatus(p, key_lock, prefix_lock != nullptr));
  }

  // 2. The fence (PassFence), unless this transaction already let the lock through at this token.
  p.highest = w.token.value();
  if (!passed_.Passed(w.lock, w.token.value(), service)) {
    bool through = false;
    if (auto s = PassFence(p, i, verifier, service, verified, receipt, &through);
        !s.ok() || !through) {
      return s;
    }
    // Strict fences refuse a second write at a token, unguarded ones take any, and under verify
    // the statement's answer depends on the fence's confirmation: there it runs every time.
    if (!options_.strict && !options_.unguarded && !options_.verify) {
      passed_.Remember(w.lock, w.token.value(), service);
    }
  }

  // 3. The precondition, once the fence let the write through (the savepoint undoes the fence's
  // move when it fails).
  if (w.if_version && *w.if_version != version) {
    return Refuse(p, PreconditionStatus(p, version));
  }

  // 4. The write itself.
  bool created = false;
  std::int64_t old_version = version;
  if (w.kind == WriteRequest::Kind::kPut) {
    created = version == 0;
    version = ++last_version_;
    Stmt& write = created ? insert_object_ : update_object_;
    if (created) {
      write.BindBlob(1, w.key);
    } else {
      write.BindInt(1, rowid);
    }
    write.BindBlob(2, w.value);
    write.BindBlob(3, w.lock);
    write.BindInt(4, w.token.value());
    write.BindInt(5, version);
    rc = write.Step();
    write.Reset();
    if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "writing the object");
  } else if (old_version != 0) {
    delete_object_.BindBlob(1, w.key);
    rc = delete_object_.Step();
    delete_object_.Reset();
    if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "deleting the object");
  }
  p.outcome = Outcome::kAccepted;
  *receipt = WriteReceipt{w.key, w.lock, w.token, version, created};
  return Status::Ok();
}

void SqliteEngine::Close() {
  // Statements must be finalized before their connection closes.
  txn_ = sqlite::TxnStatements();
  for (Stmt* st : {&advance_fence_, &read_fence_, &insert_fence_, &read_object_, &insert_object_,
                   &update_object_, &rewrite_object_, &delete_object_, &insert_run_,
                   &read_last_seq_, &trim_history_, &trim_runs_, &set_fence_, &savepoint_,
                   &rollback_to_, &release_, &read_counter_, &write_counter_, &bump_probe_}) {
    *st = Stmt();
  }
  db_ = sqlite::Db();
}

}  // namespace fencekit::fencedstore
