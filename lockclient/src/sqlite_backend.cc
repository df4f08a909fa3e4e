// The embedded lock service: a lock table and a per-lock token counter in one SQLite file.
// Safe across processes on one machine (SQLite's file locks serialise the transactions) and
// durable (WAL + synchronous=FULL: after a crash the counter never goes back).
// Expiry times are stored on the wall clock of the injected Clock, since processes share it.
//
// Waiters are served first come, first served: Acquire joins a line of waiters kept in the same
// file (table `waiters`, a ticket per waiter), and the lock goes only to the first live waiter
// of its line; TryAcquire does not jump the line. A waiter holds its place as a holder holds
// the lock: for the ttl it asked for, renewed every third of it while it waits; one that stops
// renewing (a crashed or stopped process) loses its place when that runs out, so a dead waiter
// holds up the line no longer than a dead holder would.
// A release hands the lock to the first live waiter in the same transaction (a new token, the
// waiter's ttl), so a handover costs one commit, not two; the waiter finds itself the holder.
// Waiters sleep until the release that handed them the lock (or a departure that made them
// first) wakes them through a futex on a shared file (WakeBoard), or until the holder's lease
// runs out, not on a polling timer. Only the waiter handed the lock is woken.
#include <sqlite3.h>

#include <algorithm>
#include <thread>

#include "backend.h"
#include "fencekit/common/names.h"
#include "random_id.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"
#include "wake_board.h"

namespace fencekit {
namespace {

using sqlite::Stmt;
using std::chrono::milliseconds;

constexpr int kApplicationId = 0x464C434B;  // 'FLCK'
// 1: locks and counters. 2: the service table, holding the database's service id. 3: the line
// of waiters.
constexpr int kSchemaVersion = 3;
// SQLite's default auto-checkpoint threshold, kept by the WAL hook that replaces its hook.
constexpr int kCheckpointPages = 1000;

class SqliteBackend final : public LockBackend {
 public:
  SqliteBackend(std::string path, const LockOptions& options)
      : path_(std::move(path)),
        service_("sqlite://" + path_),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        wake_(path_ + "-wake") {}

  Status Init() {
    sqlite3* raw = nullptr;
    int rc =
        sqlite3_open_v2(path_.c_str(), &raw,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    db_ = sqlite::Db(raw);
    if (rc != SQLITE_OK) return sqlite::Error(raw, rc, "opening the lock database " + service_);
    sqlite3_extended_result_codes(raw, 1);
    sqlite3_busy_handler(raw, &SqliteBackend::OnBusy, this);
    sqlite3_wal_hook(raw, &SqliteBackend::OnCommitted, this);
    if (auto s = sqlite::UseWal(raw, "the lock database " + service_); !s.ok()) return s;
    if (auto s = sqlite::Exec(raw, "PRAGMA synchronous=FULL"); !s.ok()) return s;
    auto txn_stmts = sqlite::TxnStatements::Prepare(raw, sqlite::TxnMode::kImmediate, service_);
    if (!txn_stmts.ok()) return txn_stmts.status();
    txn_ = std::move(txn_stmts).value();
    auto txn = sqlite::Transaction::Begin(txn_);
    if (!txn.ok()) return txn.status();
    auto id = Stmt::Prepare(raw, "PRAGMA application_id");
    auto tables = Stmt::Prepare(raw, "SELECT count(*) FROM sqlite_schema");
    if (!id.ok() || !tables.ok()) return !id.ok() ? id.status() : tables.status();
    id->Step();
    tables->Step();
    std::int64_t app_id = id->ColumnInt(0), count = tables->ColumnInt(0);
    id->Reset();
    tables->Reset();
    if (app_id != kApplicationId && (app_id != 0 || count != 0)) {
      return Status::InvalidArgument(service_ +
                                     " is an SQLite file but not a fencekit lock "
                                     "database; point the URI at another file");
    }
    if (app_id == 0) {
      Status s = sqlite::Exec(
          raw,
          "CREATE TABLE locks(name BLOB PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT "
          "NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
          "CREATE TABLE counters(name BLOB PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID;"
          "PRAGMA application_id=" +
              std::to_string(kApplicationId) + ";PRAGMA user_version=1;");
      if (!s.ok()) return s;
    }
    if (auto s = MigrateAndReadServiceId(raw); !s.ok()) return s;
    if (auto s = txn->Commit(); !s.ok()) return s;
    struct {
      Stmt* stmt;
      const char* sql;
    } stmts[] = {
        {&select_lock_, "SELECT owner, token, expires_ms FROM locks WHERE name = ?1"},
        {&bump_counter_,
         "INSERT INTO counters(name, token) VALUES(?1, 1) ON CONFLICT(name) DO UPDATE SET "
         "token = token + 1 RETURNING token"},
        {&put_lock_,
         "INSERT OR REPLACE INTO locks(name, owner, token, expires_ms) "
         "VALUES(?1, ?2, ?3, ?4)"},
        {&extend_,
         "UPDATE locks SET expires_ms = ?4 WHERE name = ?1 AND owner = ?2 AND "
         "token = ?3 AND expires_ms > ?5"},
        // A released lock keeps its row with expires_ms = 0, so that a second release of the
        // same lease can say so (the next grant replaces the row).
        {&delete_,
         "UPDATE locks SET expires_ms = 0 WHERE name = ?1 AND owner = ?2 AND token = ?3 AND "
         "expires_ms > 0"},
        {&select_counter_, "SELECT token FROM counters WHERE name = ?1"},
        {&join_line_,
         "INSERT INTO waiters(name, owner, ttl_ms, expires_ms) VALUES(?1, ?2, ?3, ?4)"},
        {&next_waiter_,
         "SELECT ticket, owner, ttl_ms FROM waiters WHERE name = ?1 AND expires_ms > ?2 "
         "ORDER BY ticket LIMIT 1"},
        {&beat_, "UPDATE waiters SET expires_ms = ?2 WHERE ticket = ?1"},
        {&leave_line_, "DELETE FROM waiters WHERE ticket = ?1"},
        {&drop_stale_, "DELETE FROM waiters WHERE name = ?1 AND expires_ms <= ?2"},
        // The first live waiter of a lock's line, and whether the line holds `?3`.
        {&first_waiter_,
         "SELECT min(ticket), sum(ticket = ?3) FROM waiters WHERE name = ?1 AND "
         "expires_ms > ?2"},
    };
    for (auto& [stmt, sql] : stmts) {
      auto st = Stmt::Prepare(raw, sql);
      if (!st.ok()) return st.status();
      *stmt = std::move(st).value();
    }
    return Status::Ok();
  }

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                             milliseconds* holder_remaining) override {
    std::lock_guard guard(mu_);
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

  bool QueuesWaiters() const override { return true; }

  Result<Granted> AcquireInLine(std::string_view lock, std::string_view owner, milliseconds ttl,
                                std::chrono::steady_clock::time_point deadline,
                                std::chrono::steady_clock::time_point* valid_from) override {
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
      wake_.Wait(slot, seen, std::min({wait, left, renew}));
    }
  }

 private:
  // A waiter's place in its lock's line: its ticket (0 before it joined) and when it last
  // renewed it.
  struct Place {
    std::int64_t ticket = 0;
    std::int64_t beat_ms = 0;
  };
  struct Line {
    std::int64_t first = 0;  // the first live waiter's ticket; 0 when none
    bool holds = false;      // the line holds the asked ticket
  };

  // REQUIRES: mu_ held, inside a transaction.
  Result<Line> FirstWaiter(std::string_view lock, std::int64_t ticket, std::int64_t now) {
    sqlite::ResetOnExit reset(first_waiter_);
    first_waiter_.BindBlob(1, lock);
    first_waiter_.BindInt(2, now);
    first_waiter_.BindInt(3, ticket);
    int rc = first_waiter_.Step();
    if (rc != SQLITE_ROW) return Fail(rc, "reading the line of waiters");
    return Line{first_waiter_.ColumnInt(0), first_waiter_.ColumnInt(1) > 0};
  }

  // One look at the line: joins it (again, if this waiter's place was lost to a long silence)
  // and renews its place when due, then takes the lock when this waiter is first and the lock is
  // free. kBusy otherwise, with in *wait how long to sleep at most. The line's upkeep is
  // committed without fsync (after a crash no one waits any more), so a waiter costs the disk
  // nothing; only the grant is durable. A look that changes nothing takes no write lock.
  Result<Granted> TryInLine(std::string_view lock, std::string_view owner, milliseconds ttl,
                            Place& place, milliseconds* wait,
                            std::chrono::steady_clock::time_point* valid_from) {
    std::lock_guard guard(mu_);
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

  // Joins the line (when not `in_line`), drops waiters gone silent and renews this one's place
  // for `ttl`, in one transaction committed without fsync. REQUIRES: mu_ held, no transaction
  // open.
  Status KeepPlace(std::string_view lock, std::string_view owner, milliseconds ttl, Place& place,
                   std::int64_t now, bool in_line) {
    if (auto s = sqlite::Exec(db_.get(), "PRAGMA synchronous=OFF"); !s.ok()) return s;
    Status status = [&]() -> Status {
      auto txn = sqlite::Transaction::Begin(txn_);
      if (!txn.ok()) return txn.status();
      auto step = [&](Stmt& st, const char* doing) -> Status {
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

  struct Holder {
    bool held = false;
    std::string owner;
    std::int64_t token = 0;
    std::int64_t expires_ms = 0;
  };
  // REQUIRES: mu_ held.
  Result<Holder> HolderOf(std::string_view lock, std::int64_t now) {
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

  // Gives up a place in line (a timeout, an error). When a release handed this waiter the lock
  // meanwhile, gives the lock back (to the next waiter). Failures only leave the place or the
  // lease to run out.
  void LeaveLine(std::string_view lock, std::string_view owner, const Place& place) {
    if (place.ticket == 0) return;
    std::lock_guard guard(mu_);
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

  // Bumps the counter and records the holder; commits `txn`. REQUIRES: mu_ held.
  Result<Granted> GrantInTxn(std::string_view lock, std::string_view owner, milliseconds ttl,
                             std::int64_t now, sqlite::Transaction& txn) {
    auto token = Record(lock, owner, ttl, now);
    if (!token.ok()) return token.status();
    if (auto s = txn.Commit(); !s.ok()) return s;
    return Grant(*token);
  }

  // Bumps the counter and records `owner` as the holder until now + ttl; the new token.
  // REQUIRES: mu_ held, inside a transaction.
  Result<std::int64_t> Record(std::string_view lock, std::string_view owner, milliseconds ttl,
                              std::int64_t now) {
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

  // The lock was just freed: gives it to the first live waiter of its line, if any; that
  // waiter's ticket, or 0. REQUIRES: mu_ held, inside a transaction.
  Result<std::int64_t> HandOver(std::string_view lock, std::int64_t now) {
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

 public:
  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    std::lock_guard guard(mu_);
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

  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    std::unique_lock guard(mu_);
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

  Result<LockInfo> Inspect(std::string_view lock) override {
    std::lock_guard guard(mu_);
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

  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override {
    std::lock_guard guard(mu_);
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

  std::string service_id() const override { return service_id_; }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    wake_.Wait(WakeBoard::kAnyRelease, wake_.Seen(WakeBoard::kAnyRelease), max_wait);
  }

  const std::string& service() const override { return service_; }

 private:
  // SQLite's own busy handler sleeps 1, 2, 5, 10... ms between tries: a waiter handed the lock
  // would lose that much to a neighbour's short transaction. This one tries again after 50 us,
  // backing off to 1 ms, and gives up after 10 s (SQLITE_BUSY).
  // An I/O bound, on the steady clock: SQLite calls it within one statement.
  static int OnBusy(void* self, int count) {
    auto* backend = static_cast<SqliteBackend*>(self);
    auto now = std::chrono::steady_clock::now();
    if (count == 0) backend->busy_since_ = now;
    if (now - backend->busy_since_ > std::chrono::seconds(10)) return 0;
    // Sleeps until the next commit of any process (the write lock is free then), or a backoff.
    const auto seen = backend->wake_.Seen(WakeBoard::kCommitted);
    backend->wake_.Wait(WakeBoard::kCommitted, seen,
                        std::chrono::microseconds(std::min(50 << std::min(count, 5), 1000)));
    return 1;
  }

  // After each commit, once the write lock is free again (SQLite's WAL hook): wakes the busy
  // handlers of all processes, so that a process joining the line is not kept out by one that
  // releases and re-takes the lock in a tight loop. Checkpoints as SQLite's default hook (which
  // this one replaces) does.
  static int OnCommitted(void* self, sqlite3* db, const char* name, int wal_pages) {
    static_cast<SqliteBackend*>(self)->wake_.Wake(WakeBoard::kCommitted);
    if (wal_pages >= kCheckpointPages) {
      sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
    return SQLITE_OK;
  }

  std::int64_t NowMs() const {
    return std::chrono::duration_cast<milliseconds>(clock_->WallNow().time_since_epoch()).count();
  }

  Result<Granted> Grant(std::int64_t token) {
    auto t = FencingToken::FromInt(token);
    if (!t.ok()) return Status::Internal(service_ + " holds a bad token: " + t.status().message());
    return Granted{*t, service_id_};
  }

  // Brings a version 1 database to kSchemaVersion (a service id made now) and reads the id.
  // REQUIRES: inside the opening transaction.
  Status MigrateAndReadServiceId(sqlite3* raw) {
    auto version = Stmt::Prepare(raw, "PRAGMA user_version");
    if (!version.ok()) return version.status();
    version->Step();
    std::int64_t v = version->ColumnInt(0);
    version->Reset();
    if (v > kSchemaVersion) {
      return Status::InvalidArgument(service_ + " has lock schema version " + std::to_string(v) +
                                     ", newer than this fencekit's (" +
                                     std::to_string(kSchemaVersion) + "); upgrade fencekit");
    }
    if (v < 2) {
      auto id = RandomHex128();
      if (!id.ok()) return id.status();
      Status s = sqlite::Exec(raw,
                              "CREATE TABLE service(id TEXT NOT NULL);"
                              "INSERT INTO service(id) VALUES('sqlite:" +
                                  *id +
                                  "');"
                                  "PRAGMA user_version=2;");
      if (!s.ok()) return s;
    }
    if (v < 3) {
      Status s =
          sqlite::Exec(raw,
                       "CREATE TABLE waiters(ticket INTEGER PRIMARY KEY, name BLOB NOT NULL, "
                       "owner TEXT NOT NULL, ttl_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL);"
                       "CREATE INDEX waiters_by_lock ON waiters(name, ticket);"
                       "PRAGMA user_version=3;");
      if (!s.ok()) return s;
    }
    auto read = Stmt::Prepare(raw, "SELECT id FROM service");
    if (!read.ok()) return read.status();
    if (read->Step() != SQLITE_ROW) {
      return Status::InvalidArgument(service_ +
                                     " has no service id; the lock database is "
                                     "damaged, point the URI at another file");
    }
    service_id_ = read->ColumnBytes(0);
    read->Reset();
    if (Status s = CheckServiceId(service_id_); !s.ok()) {
      return Status::InvalidArgument(service_ + " holds a malformed service id: " + s.message());
    }
    return Status::Ok();
  }

  // REQUIRES: mu_ held, inside a transaction.
  Status WhyNotHeld(std::string_view lock, std::string_view owner, std::int64_t now) {
    sqlite::ResetOnExit reset(select_lock_);
    select_lock_.BindBlob(1, lock);
    int rc = select_lock_.Step();
    if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) > now) {
      if (select_lock_.ColumnBytes(0) == owner) return Status::Ok();
      return Status::NotHeld(Subject(lock, service_) + " is held by another owner (token " +
                             std::to_string(select_lock_.ColumnInt(1)) +
                             "); this lease is lost, acquire again");
    }
    if (rc == SQLITE_ROW && select_lock_.ColumnInt(2) == 0 &&
        select_lock_.ColumnBytes(0) == owner) {
      return Status::NotHeld(Subject(lock, service_) +
                             ": this lease was already released; acquire again");
    }
    return Status::NotHeld(Subject(lock, service_) +
                           ": the lease expired before this request; acquire again");
  }

  // The open transaction's destructor rolls it back.
  Status Fail(int rc, std::string_view doing) {
    return sqlite::Error(db_.get(), rc, std::string(doing) + " on " + service_);
  }

  std::string path_;
  std::string service_;
  std::string service_id_;  // "sqlite:<32 hex>", kept in the database; set by Init
  Clock* clock_;
  WakeBoard wake_;
  std::chrono::steady_clock::time_point busy_since_;  // GUARDED_BY(mu_): see OnBusy
  std::mutex mu_;
  sqlite::Db db_;  // GUARDED_BY(mu_), with every statement below
  sqlite::TxnStatements txn_;
  Stmt select_lock_, bump_counter_, put_lock_, extend_, delete_, select_counter_, join_line_,
      next_waiter_, beat_, leave_line_, drop_stale_, first_waiter_;
};

}  // namespace

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

}  // namespace fencekit
