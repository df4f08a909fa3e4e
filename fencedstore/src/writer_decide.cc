// How one write, or one fence administration, is decided and recorded inside the writer's
// transaction: the key's lock, the fence (token, service, confirmation), the object, the
// history. The queue, the thread and the batches are in writer.cc.
#include <sqlite3.h>

#include <string>
#include <utility>

#include "fencekit/common/names.h"
#include "writer.h"

namespace fencekit::fencedstore {

using sqlite::Stmt;

namespace {

// SQL NULL for an empty text: a write without a service or a principal stores NULL.
void BindTextOrNull(Stmt& st, int i, std::string_view text) {
  st.BindText(i, text.empty() ? std::string_view() : text);
}

std::string Quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

}  // namespace

Status Writer::Apply(Pending& p, std::int64_t now_ms, std::int64_t& last_seq) {
  sqlite3* db = writer_db_.get();
  const WriteRequest& w = p.request;
  const bool verified = p.verdict != nullptr && p.verdict->ok() && (*p.verdict)->current;
  std::string_view service = w.service;
  // Under verify only the lock service names the service a fence binds to: a verdict without
  // one binds none, whatever the write claims.
  if (verified && (*p.verdict)->service.empty()) service = {};
  if (verified && !(*p.verdict)->service.empty()) {
    const std::string& confirmed = (*p.verdict)->service;
    if (!service.empty() && service != confirmed) {
      return Refuse(
          p, Refusal::kWrongService,
          Status::WrongService("the token was confirmed by lock service " + Quoted(confirmed) +
                               ", but the write names " + Quoted(service) +
                               "; send the service of the lease that holds the token"),
          now_ms, last_seq);
    }
    service = confirmed;
  }

  // 1. The key's lock: lock_for's for its prefix, else the lock of the write that created it.
  std::int64_t version = 0;
  std::string key_lock;
  read_object_.BindBlob(1, w.key);
  int rc = read_object_.Step();
  if (rc == SQLITE_ROW) {
    version = read_object_.ColumnInt(0);
    if (p.prefix_lock == nullptr) key_lock = read_object_.ColumnBytes(1);
  }
  read_object_.Reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return sqlite::Error(db, rc, "reading the object");
  }
  if (p.prefix_lock != nullptr) key_lock = *p.prefix_lock;
  if (!key_lock.empty() && key_lock != w.lock) {
    std::string why =
        p.prefix_lock != nullptr
            ? "bound to lock " + Quoted(key_lock) + " by the store's configuration (lock_for)"
            : "bound to lock " + Quoted(key_lock) + ", the lock of the write that created it";
    return Refuse(
        p, Refusal::kWrongLock,
        Status::WrongLock(
            "the key is " + why + "; this write names lock " + Quoted(w.lock) +
                ". Write it under lock " + Quoted(key_lock) +
                (p.prefix_lock != nullptr ? "" : ", or delete it under that lock to free it"),
            key_lock),
        now_ms, last_seq);
  }

  // 2. The fence: advance it iff the token is new enough, of the fence's service, and (under
  // verify) confirmed when it moves the fence up; or create it.
  advance_fence_.BindBlob(1, w.lock);
  advance_fence_.BindInt(2, w.token.value());
  BindTextOrNull(advance_fence_, 3, service);
  if (options_.verify && !options_.unguarded) advance_fence_.BindInt(4, verified ? 1 : 0);
  rc = advance_fence_.Step();
  advance_fence_.Reset();
  if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "checking the fence");
  bool accepted = sqlite3_changes(db) == 1;
  p.highest = w.token.value();
  if (!accepted || options_.unguarded) {
    bool exists = false;
    std::string fence_service;
    if (auto s = ReadFence(w.lock, &exists, &p.highest, &fence_service); !s.ok()) return s;
    if (!accepted && exists) {
      if (!service.empty() && !fence_service.empty() && fence_service != service) {
        return Refuse(p, Refusal::kWrongService,
                      Status::WrongService(
                          "lock " + Quoted(w.lock) + " is fenced by tokens of lock service " +
                          Quoted(fence_service) + "; this token comes from " + Quoted(service) +
                          ", whose tokens cannot be compared with them. Use a lease of that "
                          "service (or have an administrator unbind the fence)"),
                      now_ms, last_seq);
      }
      if (w.token.value() < p.highest || (options_.strict && w.token.value() == p.highest) ||
          options_.unguarded) {
        return Refuse(
            p, Refusal::kStale,
            Status::StaleToken(
                "fencing token " + w.token.ToString() + " for lock " + Quoted(w.lock) +
                    " is stale: the store has already accepted token " + std::to_string(p.highest) +
                    (options_.strict && p.highest == w.token.value()
                         ? " (strict mode allows one write per token)"
                         : "") +
                    ". Your lease was lost; acquire the lock again to get a newer token",
                p.highest),
            now_ms, last_seq);
      }
    }
    if (!accepted && (exists || (verifier_ != nullptr && !verified && !options_.unguarded))) {
      // The token would move the fence up (or create it) and the lock service has not confirmed
      // it yet.
      p.highest = exists ? p.highest : 0;
      if (verifier_ == nullptr) {  // unreachable: without verify the fence takes such a token
        p.outcome = Outcome::kFailed;
        p.result = Status::Internal("the fence refused a token above it; nothing was written");
        return Status::Ok();
      }
      if (p.verdict == nullptr) {
        p.verdict = verifier_->Answer(w.lock, w.token);
        if (p.verdict != nullptr) return Apply(p, now_ms, last_seq);
        p.outcome = Outcome::kDeferred;  // not recorded: it comes back with the answer
        return Status::Ok();
      }
      if (!p.verdict->ok()) {  // fail closed: nothing changed, nothing recorded
        p.outcome = Outcome::kFailed;
        p.result = p.verdict->status();
        return Status::Ok();
      }
      return Refuse(p, Refusal::kUnverified,
                    Status::UnverifiedToken(
                        "the lock service does not confirm fencing token " + w.token.ToString() +
                        " as the current holder's token of lock " + Quoted(w.lock) +
                        "; nothing was written. Acquire the lock to get a current token"),
                    now_ms, last_seq);
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

  // 3. The write itself.
  bool created = false;
  if (w.kind == WriteRequest::Kind::kPut) {
    created = version == 0;
    ++version;
    upsert_object_.BindBlob(1, w.key);
    upsert_object_.BindBlob(2, w.value);
    upsert_object_.BindBlob(3, w.lock);
    upsert_object_.BindInt(4, w.token.value());
    upsert_object_.BindInt(5, version);
    rc = upsert_object_.Step();
    upsert_object_.Reset();
    if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "writing the object");
  } else if (version != 0) {
    delete_object_.BindBlob(1, w.key);
    rc = delete_object_.Step();
    delete_object_.Reset();
    if (rc != SQLITE_DONE) return sqlite::Error(db, rc, "deleting the object");
  }
  p.outcome = Outcome::kAccepted;
  p.result = WriteReceipt{w.key, w.lock, w.token, version, created};
  // 4. The record of the decision.
  return Record(p, now_ms, last_seq);
}

Status Writer::Refuse(Pending& p, Refusal why, Status status, std::int64_t now_ms,
                      std::int64_t& last_seq) {
  if (why != Refusal::kStale && why != Refusal::kUnverified) {
    // Refused before the fence was read: record the fence as it stands.
    bool exists = false;
    std::string service;
    p.highest = 0;
    if (auto s = ReadFence(p.request.lock, &exists, &p.highest, &service); !s.ok()) return s;
  }
  p.outcome = Outcome::kRefused;
  p.refusal = why;
  p.result = std::move(status);
  return Record(p, now_ms, last_seq);
}

Status Writer::ReadFence(const std::string& lock, bool* exists, std::int64_t* highest,
                         std::string* service) {
  sqlite::ResetOnExit reset(read_fence_);
  read_fence_.BindBlob(1, lock);
  int rc = read_fence_.Step();
  *exists = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) {
    *highest = read_fence_.ColumnInt(0);
    *service = read_fence_.ColumnBytes(1);
  } else if (rc != SQLITE_DONE) {
    return sqlite::Error(writer_db_.get(), rc, "reading the fence");
  }
  return Status::Ok();
}

Status Writer::Record(const Pending& p, std::int64_t now_ms, std::int64_t& last_seq) {
  if (options_.history_limit == 0) return Status::Ok();
  static constexpr std::string_view kReasons[] = {"", "stale_token", "wrong_lock", "wrong_service",
                                                  "unverified_token"};
  const WriteRequest& w = p.request;
  sqlite::ResetOnExit reset(insert_history_);
  insert_history_.BindInt(1, now_ms);
  insert_history_.BindText(2, w.kind == WriteRequest::Kind::kPut ? "put" : "delete");
  insert_history_.BindBlob(3, w.lock);
  insert_history_.BindInt(4, w.token.value());
  insert_history_.BindBlob(5, w.key);
  insert_history_.BindInt(6, p.outcome == Outcome::kAccepted ? 1 : 0);
  insert_history_.BindInt(7, p.highest);
  BindTextOrNull(insert_history_, 8, kReasons[static_cast<int>(p.refusal)]);
  BindTextOrNull(insert_history_, 9, w.principal);
  int rc = insert_history_.Step();
  if (rc != SQLITE_DONE) return sqlite::Error(writer_db_.get(), rc, "recording the decision");
  last_seq = sqlite3_last_insert_rowid(writer_db_.get());
  return Status::Ok();
}

Result<Decision> Writer::RunSetFence(const AdminOp& op) {
  sqlite3* db = writer_db_.get();
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
          .count();
  Decision d;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(now_ms));
  d.op = "set_fence";
  d.lock = op.lock;
  d.token = op.highest.value();
  d.accepted = true;
  d.highest = op.highest.value();
  d.principal = op.principal;
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
  if (failure.ok() && options_.history_limit > 0) {
    sqlite::ResetOnExit reset(insert_history_);
    insert_history_.BindInt(1, now_ms);
    insert_history_.BindText(2, d.op);
    insert_history_.BindBlob(3, op.lock);
    insert_history_.BindInt(4, d.token);
    insert_history_.BindBlob(5, "");
    insert_history_.BindInt(6, 1);
    insert_history_.BindInt(7, d.highest);
    BindTextOrNull(insert_history_, 8, "");
    BindTextOrNull(insert_history_, 9, op.principal);
    int rc = insert_history_.Step();
    if (rc != SQLITE_DONE) failure = sqlite::Error(db, rc, "recording the decision");
    d.seq = sqlite3_last_insert_rowid(db);
  }
  if (failure.ok()) failure = txn->Commit();
  if (!failure.ok()) {
    if (txn.ok()) txn->Rollback();
    Status s = Status::IoError("the fence was not set: " + failure.message() + ". Retry");
    return failure.IsUnavailable() ? Status::Unavailable(s.message()) : s;
  }
  return d;
}

}  // namespace fencekit::fencedstore
