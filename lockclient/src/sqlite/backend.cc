// The lock's rules on the embedded lock service (see backend.h): grant, extend, release,
// inspect and check a token, each in one transaction.
#include "sqlite/backend.h"

#include <sqlite3.h>

#include <algorithm>

#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"

namespace fencekit::lockclient {
namespace {

using std::chrono::milliseconds;

// SQLite's default auto-checkpoint threshold, kept by the WAL hook that replaces its hook.
constexpr int kCheckpointPages = 1000;

}  // namespace

SqliteBackend::SqliteBackend(std::string path, const LockOptions& options)
    : path_(std::move(path)),
      service_("sqlite://" + path_),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      wake_(path_ + "-wake") {}

Result<Granted> SqliteBackend::TryAcquire(std::string_view lock, std::string_view owner,
                                          milliseconds ttl, milliseconds* holder_remaining) {
  MutexLock guard(mu_);
  auto now = NowMs();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) return txn.status();
  select_lock_.BindBlob(1, lock);
  int rc = select_lock_.Step();
  if (rc == SQLITE_ROW) {
    std::string holder = select_lock_.ColumnBytes(0);
    std::int64_t token = select_lock_.ColumnInt(1), expires = select_lock_.ColumnInt(2);
    select_lock_.Reset();
    if (expires > now) {
      if (holder == owner) return Grant(token);  // a retried grant
      *holder_remaining = milliseconds(expires - now);
      return Status::Busy(Subject(lock, service_) + " is held");
    }
  } else {
    select_lock_.Reset();
    if (rc != SQLITE_DONE) return Fail(rc, "reading the lock");
  }
  auto line = FirstWaiter(lock, 0, now);
  if (!line.ok()) return line.status();
  if (line->first != 0) {
    *holder_remaining = milliseconds(0);
    return Status::Busy(Subject(lock, service_) + " is free, but others wait in line for it");
  }
  return GrantInTxn(lock, owner, ttl, now, *txn);
}

Status SqliteBackend::Extend(std::string_view lock, std::string_view owner, FencingToken token,
                             milliseconds ttl) {
  MutexLock guard(mu_);
  auto now = NowMs();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) return txn.status();
  extend_.BindBlob(1, lock);
  extend_.BindText(2, owner);
  extend_.BindInt(3, token.value());
  extend_.BindInt(4, now + ttl.count());
  extend_.BindInt(5, now);
  int rc = extend_.Step();
  extend_.Reset();
  if (rc != SQLITE_DONE) return Fail(rc, "extending the lock");
  if (sqlite3_changes(db_.get()) == 1) return txn->Commit();
  return WhyNotHeld(lock, owner, now);
}

Status SqliteBackend::Release(std::string_view lock, std::string_view owner, FencingToken token) {
  MutexLock guard(mu_);
  auto now = NowMs();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) return txn.status();
  Status why = WhyNotHeld(lock, owner, now);
  delete_.BindBlob(1, lock);
  delete_.BindText(2, owner);
  delete_.BindInt(3, token.value());
  int rc = delete_.Step();
  delete_.Reset();
  if (rc != SQLITE_DONE) return Fail(rc, "releasing the lock");
  std::int64_t handed = 0;
  if (sqlite3_changes(db_.get()) == 1) {
    auto next = HandOver(lock, now);
    if (!next.ok()) return next.status();
    handed = *next;
  }
  if (auto s = txn->Commit(); !s.ok()) return s;
  if (handed != 0) wake_.Wake(WakeBoard::SlotOfTicket(handed));
  wake_.Wake(WakeBoard::kAnyRelease);
  return why;
}

Result<LockInfo> SqliteBackend::Inspect(std::string_view lock) {
  MutexLock guard(mu_);
  auto now = NowMs();
  LockInfo info;
  info.lock = std::string(lock);
  sqlite::ResetOnExit r1(select_lock_), r2(select_counter_);
  select_lock_.BindBlob(1, lock);
  int rc = select_lock_.Step();
  if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) > now) {
    info.held = true;
    info.owner = select_lock_.ColumnBytes(0);
    info.token = FencingToken::FromInt(select_lock_.ColumnInt(1)).value();
    info.remaining = milliseconds(select_lock_.ColumnInt(2) - now);
  } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return sqlite::Error(db_.get(), rc, "inspecting " + Subject(lock, service_));
  }
  select_counter_.BindBlob(1, lock);
  if (select_counter_.Step() == SQLITE_ROW) {
    info.last_token = FencingToken::FromInt(select_counter_.ColumnInt(0)).value();
  }
  return info;
}

Result<TokenCheck> SqliteBackend::CheckToken(std::string_view lock, FencingToken token) {
  MutexLock guard(mu_);
  auto now = NowMs();
  TokenCheck check{.service = service_id_};
  sqlite::ResetOnExit reset(select_lock_);
  select_lock_.BindBlob(1, lock);
  int rc = select_lock_.Step();
  if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) > now) {
    auto holder = FencingToken::FromInt(select_lock_.ColumnInt(1));
    if (!holder.ok())
      return Status::Internal(service_ + " holds a bad token: " + holder.status().message());
    check.holder = *holder;
    check.current = *holder == token;
  } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return sqlite::Error(db_.get(), rc, "checking a token of " + Subject(lock, service_));
  }
  return check;
}

void SqliteBackend::WaitForRelease(std::string_view lock, milliseconds max_wait) {
  wake_.Wait(WakeBoard::kAnyRelease, wake_.Seen(WakeBoard::kAnyRelease), max_wait);
}

int SqliteBackend::OnBusy(void* self, int count) {
  auto* backend = static_cast<SqliteBackend*>(self);
  // Real time (not Clock): SQLite's busy handler blocks the calling thread for real.
  auto now = std::chrono::steady_clock::now();
  if (count == 0) backend->busy_since_ = now;
  if (now - backend->busy_since_ > std::chrono::seconds(10)) return 0;
  // Sleeps until the next commit of any process (the write lock is free then), or a backoff.
  const auto seen = backend->wake_.Seen(WakeBoard::kCommitted);
  backend->wake_.Wait(WakeBoard::kCommitted, seen,
                      std::chrono::microseconds(std::min(50 << std::min(count, 5), 1000)));
  return 1;
}

int SqliteBackend::OnCommitted(void* self, sqlite3* db, const char* name, int wal_pages) {
  static_cast<SqliteBackend*>(self)->wake_.Wake(WakeBoard::kCommitted);
  if (wal_pages >= kCheckpointPages) {
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
  return SQLITE_OK;
}

std::int64_t SqliteBackend::NowMs() const {
  return std::chrono::duration_cast<milliseconds>(clock_->WallNow().time_since_epoch()).count();
}

Result<Granted> SqliteBackend::Grant(std::int64_t token) {
  auto t = FencingToken::FromInt(token);
  if (!t.ok()) return Status::Internal(service_ + " holds a bad token: " + t.status().message());
  return Granted{*t, service_id_};
}

Result<SqliteBackend::Holder> SqliteBackend::HolderOf(std::string_view lock, std::int64_t now) {
  sqlite::ResetOnExit reset(select_lock_);
  select_lock_.BindBlob(1, lock);
  int rc = select_lock_.Step();
  if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) > now) {
    return Holder{true, select_lock_.ColumnBytes(0), select_lock_.ColumnInt(1),
                  select_lock_.ColumnInt(2)};
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Fail(rc, "reading the lock");
  return Holder{};
}

Result<Granted> SqliteBackend::GrantInTxn(std::string_view lock, std::string_view owner,
                                          milliseconds ttl, std::int64_t now,
                                          sqlite::Transaction& txn) {
  auto token = Record(lock, owner, ttl, now);
  if (!token.ok()) return token.status();
  if (auto s = txn.Commit(); !s.ok()) return s;
  return Grant(*token);
}

Result<std::int64_t> SqliteBackend::Record(std::string_view lock, std::string_view owner,
                                           milliseconds ttl, std::int64_t now) {
  bump_counter_.BindBlob(1, lock);
  int rc = bump_counter_.Step();
  if (rc != SQLITE_ROW) return Fail(rc, "advancing the token counter");
  std::int64_t token = bump_counter_.ColumnInt(0);
  bump_counter_.Reset();
  put_lock_.BindBlob(1, lock);
  put_lock_.BindText(2, owner);
  put_lock_.BindInt(3, token);
  put_lock_.BindInt(4, now + ttl.count());
  rc = put_lock_.Step();
  put_lock_.Reset();
  if (rc != SQLITE_DONE) return Fail(rc, "recording the lock");
  return token;
}

Status SqliteBackend::WhyNotHeld(std::string_view lock, std::string_view owner, std::int64_t now) {
  sqlite::ResetOnExit reset(select_lock_);
  select_lock_.BindBlob(1, lock);
  int rc = select_lock_.Step();
  if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) > now) {
    if (select_lock_.ColumnBytes(0) == owner) return Status::Ok();
    return Status::NotHeld(Subject(lock, service_) + " is held by another owner (token " +
                           std::to_string(select_lock_.ColumnInt(1)) +
                           "); this lease is lost, acquire again");
  }
  if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) == 0 && select_lock_.ColumnBytes(0) == owner) {
    return Status::NotHeld(Subject(lock, service_) +
                           ": this lease was already released; acquire again");
  }
  return Status::NotHeld(Subject(lock, service_) +
                         ": the lease expired before this request; acquire again");
}

Status SqliteBackend::Fail(int rc, std::string_view doing) {
  return sqlite::Error(db_.get(), rc, std::string(doing) + " on " + service_);
}

Result<std::unique_ptr<LockBackend>> OpenSqliteBackend(std::string_view uri,
                                                       const LockOptions& options) {
  std::string path(uri.substr(std::string_view("sqlite://").size()));
  if (path.empty() || path == "/") {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) +
                                   "\" names no file; use sqlite:///abs/path/locks.db or "
                                   "sqlite://./relative/locks.db");
  }
  auto backend = std::make_unique<SqliteBackend>(path, options);
  if (auto s = backend->Init(); !s.ok()) return s;
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit::lockclient
