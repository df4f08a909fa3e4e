// The line of waiters: joining it, keeping a place in it, leaving it, and the handover of a
// released lock to its first live waiter (see sqlite/backend.h).
#include <sqlite3.h>

#include <algorithm>

#include "fencekit/common/mutex.h"
#include "sqlite/backend.h"

namespace fencekit::lockclient {

using sqlite::Stmt;
using std::chrono::milliseconds;

Result<Granted> SqliteBackend::AcquireInLine(std::string_view lock, std::string_view owner,
                                             milliseconds ttl,
                                             std::chrono::steady_clock::time_point deadline,
                                             std::chrono::steady_clock::time_point* valid_from) {
  Place place;
  const milliseconds renew = std::max(ttl / 3, milliseconds(1));
  for (;;) {
    // Read before the look, so that a handover between the look and the sleep is not missed.
    const std::uint32_t slot = WakeBoard::SlotOfTicket(place.ticket);
    const std::uint32_t seen = wake_.Seen(slot);
    *valid_from = clock_->Now();
    milliseconds wait = renew;
    auto granted = TryInLine(lock, owner, ttl, place, &wait, valid_from);
    if (granted.ok() || !granted.status().IsBusy()) {
      if (!granted.ok()) LeaveLine(lock, owner, place);
      return granted;
    }
    auto now = clock_->Now();  // the caller's deadline is on the injected clock
    if (now >= deadline) {
      LeaveLine(lock, owner, place);
      return Status::Timeout(Subject(lock, service_) + " is still held");
    }
    if (WakeBoard::SlotOfTicket(place.ticket) != slot) continue;  // joined: look again
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1);
    wake_.Wait(slot, seen,
               std::chrono::duration_cast<std::chrono::microseconds>(
                   clock_->RealWait(std::min({wait, left, renew}))));
  }
}

Result<SqliteBackend::Line> SqliteBackend::FirstWaiter(std::string_view lock, std::int64_t ticket,
                                                       std::int64_t now) {
  sqlite::ResetOnExit reset(first_waiter_);
  first_waiter_.BindBlob(1, lock);
  first_waiter_.BindInt(2, now);
  first_waiter_.BindInt(3, ticket);
  int rc = first_waiter_.Step();
  if (rc != SQLITE_ROW) return Fail(rc, "reading the line of waiters");
  return Line{first_waiter_.ColumnInt(0), first_waiter_.ColumnInt(1) > 0};
}

Result<Granted> SqliteBackend::TryInLine(std::string_view lock, std::string_view owner,
                                         milliseconds ttl, Place& place, milliseconds* wait,
                                         std::chrono::steady_clock::time_point* valid_from) {
  MutexLock guard(mu_);
  auto now = NowMs();
  if (place.ticket != 0) {
    // A release may have handed this waiter the lock: its lease began then, not now.
    auto holder = HolderOf(lock, now);
    if (!holder.ok()) return holder.status();
    if (holder->held && holder->owner == owner) {
      place.ticket = 0;
      *valid_from -=
          milliseconds(std::max<std::int64_t>(0, ttl.count() - (holder->expires_ms - now)));
      return Grant(holder->token);
    }
  }
  auto line = FirstWaiter(lock, place.ticket, now);
  if (!line.ok()) return line.status();
  if (place.ticket == 0 || !line->holds ||
      now - place.beat_ms >= std::max<std::int64_t>(ttl.count() / 3, 1)) {
    if (auto s = KeepPlace(lock, owner, ttl, place, now, line->holds); !s.ok()) return s;
    line = FirstWaiter(lock, place.ticket, now);
    if (!line.ok()) return line.status();
  }
  auto holder = HolderOf(lock, now);
  if (!holder.ok()) return holder.status();
  if (holder->held && holder->owner != owner) {
    *wait = milliseconds(holder->expires_ms - now + 1);
    return Status::Busy(Subject(lock, service_) + " is held");
  }
  if (line->first != place.ticket) {
    return Status::Busy(Subject(lock, service_) + " goes to the waiters before this one");
  }
  // First in line, and the lock is free (or already ours): take it, checking again inside
  // the transaction.
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) return txn.status();
  line = FirstWaiter(lock, place.ticket, now);
  if (!line.ok()) return line.status();
  holder = HolderOf(lock, now);
  if (!holder.ok()) return holder.status();
  if ((holder->held && holder->owner != owner) || line->first != place.ticket) {
    return Status::Busy(Subject(lock, service_) + " was taken meanwhile");
  }
  leave_line_.BindInt(1, place.ticket);
  int rc = leave_line_.Step();
  leave_line_.Reset();
  if (rc != SQLITE_DONE) return Fail(rc, "leaving the line of waiters");
  place.ticket = 0;
  if (holder->held) {  // a retried grant
    if (auto s = txn->Commit(); !s.ok()) return s;
    return Grant(holder->token);
  }
  return GrantInTxn(lock, owner, ttl, now, *txn);
}

Status SqliteBackend::KeepPlace(std::string_view lock, std::string_view owner, milliseconds ttl,
                                Place& place, std::int64_t now, bool in_line) {
  if (auto s = sqlite::Exec(db_.get(), "PRAGMA synchronous=OFF"); !s.ok()) return s;
  Status status = [&]() FENCEKIT_REQUIRES(mu_) -> Status {
    auto txn = sqlite::Transaction::Begin(txn_);
    if (!txn.ok()) return txn.status();
    auto step = [&](Stmt& st, const char* doing) FENCEKIT_REQUIRES(mu_) -> Status {
      int rc = st.Step();
      st.Reset();
      return rc == SQLITE_DONE ? Status::Ok() : Fail(rc, doing);
    };
    drop_stale_.BindBlob(1, lock);
    drop_stale_.BindInt(2, now);
    if (auto s = step(drop_stale_, "clearing the line of waiters"); !s.ok()) return s;
    if (place.ticket == 0 || !in_line) {
      join_line_.BindBlob(1, lock);
      join_line_.BindText(2, owner);
      join_line_.BindInt(3, ttl.count());
      join_line_.BindInt(4, now + ttl.count());
      if (auto s = step(join_line_, "joining the line of waiters"); !s.ok()) return s;
      place.ticket = sqlite3_last_insert_rowid(db_.get());
    } else {
      beat_.BindInt(1, place.ticket);
      beat_.BindInt(2, now + ttl.count());
      if (auto s = step(beat_, "waiting in line"); !s.ok()) return s;
    }
    place.beat_ms = now;
    return txn->Commit();
  }();
  Status full = sqlite::Exec(db_.get(), "PRAGMA synchronous=FULL");
  return status.ok() ? full : status;
}

void SqliteBackend::LeaveLine(std::string_view lock, std::string_view owner, const Place& place) {
  if (place.ticket == 0) return;
  MutexLock guard(mu_);
  auto now = NowMs();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) return;
  leave_line_.BindInt(1, place.ticket);
  int rc = leave_line_.Step();
  leave_line_.Reset();
  if (rc != SQLITE_DONE) return;
  std::int64_t handed = 0;
  if (sqlite3_changes(db_.get()) == 0) {
    auto holder = HolderOf(lock, now);
    if (!holder.ok() || !holder->held || holder->owner != owner) return;
    delete_.BindBlob(1, lock);
    delete_.BindText(2, owner);
    delete_.BindInt(3, holder->token);
    rc = delete_.Step();
    delete_.Reset();
    if (rc != SQLITE_DONE) return;
    auto next = HandOver(lock, now);
    if (!next.ok()) return;
    handed = *next;
  }
  auto line = FirstWaiter(lock, 0, now);  // may be first now
  if (!txn->Commit().ok()) return;
  if (handed != 0) wake_.Wake(WakeBoard::SlotOfTicket(handed));
  if (line.ok() && line->first != 0) wake_.Wake(WakeBoard::SlotOfTicket(line->first));
}

Result<std::int64_t> SqliteBackend::HandOver(std::string_view lock, std::int64_t now) {
  next_waiter_.BindBlob(1, lock);
  next_waiter_.BindInt(2, now);
  int rc = next_waiter_.Step();
  if (rc == SQLITE_DONE) {
    next_waiter_.Reset();
    return std::int64_t{0};
  }
  if (rc != SQLITE_ROW) {
    next_waiter_.Reset();
    return Fail(rc, "reading the line of waiters");
  }
  std::int64_t ticket = next_waiter_.ColumnInt(0);
  std::string owner = next_waiter_.ColumnBytes(1);
  milliseconds ttl(next_waiter_.ColumnInt(2));
  next_waiter_.Reset();
  if (auto token = Record(lock, owner, ttl, now); !token.ok()) return token.status();
  leave_line_.BindInt(1, ticket);
  rc = leave_line_.Step();
  leave_line_.Reset();
  if (rc != SQLITE_DONE) return Fail(rc, "handing the lock over");
  return ticket;
}

}  // namespace fencekit::lockclient
