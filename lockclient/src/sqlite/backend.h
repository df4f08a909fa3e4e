// The embedded lock service: a lock table and a per-lock token counter in one SQLite file.
// Safe across processes on one machine (SQLite's file locks serialise the transactions) and
// durable (WAL + synchronous=FULL: after a crash the counter never goes back).
// Expiry times are stored on the wall clock of the injected Clock, since processes share it.
//
// Waiters are served first come, first served: AcquireInLine joins a line of waiters kept in
// the same file (table `waiters`, a ticket per waiter), and the lock goes only to the first live
// waiter of its line; TryAcquire does not jump the line. A waiter holds its place as a holder
// holds the lock: for the ttl it asked for, renewed every third of it while it waits; one that
// stops renewing (a crashed or stopped process) loses its place when that runs out, so a dead
// waiter holds up the line no longer than a dead holder would.
// A release hands the lock to the first live waiter in the same transaction (a new token, the
// waiter's ttl), so a handover costs one commit, not two; the waiter finds itself the holder.
// Waiters sleep until the release that handed them the lock (or a departure that made them
// first) wakes them through a futex on a shared file (WakeBoard), or until the holder's lease
// runs out, not on a polling timer. Only the waiter handed the lock is woken.
//
// Files: backend.cc (the lock's rules: grant, extend, release, inspect),
// schema.cc (opening: the schema, its migrations, the statements) and
// waiting_line.cc (the line of waiters).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "lock_backend.h"
#include "fencekit/common/clock.h"
#include "fencekit/common/mutex.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"
#include "sqlite/wake_board.h"

namespace fencekit::lockclient {

// Thread safety: safe for concurrent use (one mutex over the connection and its statements);
// processes sharing the file are serialised by SQLite's locks.
class SqliteBackend final : public LockBackend {
 public:
  SqliteBackend(std::string path, const LockOptions& options);

  // Opens the file (creating it), migrates its schema and prepares the statements. Call once,
  // before anything else.
  Status Init();

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner,
                             std::chrono::milliseconds ttl,
                             std::chrono::milliseconds* holder_remaining) override;
  bool QueuesWaiters() const override { return true; }
  Result<Granted> AcquireInLine(std::string_view lock, std::string_view owner,
                                std::chrono::milliseconds ttl,
                                std::chrono::steady_clock::time_point deadline,
                                std::chrono::steady_clock::time_point* valid_from) override;
  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                std::chrono::milliseconds ttl) override;
  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override;
  Result<LockInfo> Inspect(std::string_view lock) override;
  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override;
  std::string service_id() const override { return service_id_; }
  void WaitForRelease(std::string_view lock, std::chrono::milliseconds max_wait) override;
  const std::string& service() const override { return service_; }

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
  struct Holder {
    bool held = false;
    std::string owner;
    std::int64_t token = 0;
    std::int64_t expires_ms = 0;
  };

  // --- opening (sqlite_lock_schema.cc) ---
  // Brings a version 1 database to kSchemaVersion (a service id made now) and reads the id.
  // REQUIRES: inside the opening transaction.
  Status MigrateAndReadServiceId(sqlite3* raw) FENCEKIT_REQUIRES(mu_);

  // --- the line of waiters (waiting_line.cc) ---
  // REQUIRES: inside a transaction.
  Result<Line> FirstWaiter(std::string_view lock, std::int64_t ticket, std::int64_t now)
      FENCEKIT_REQUIRES(mu_);
  // One look at the line: joins it (again, if this waiter's place was lost to a long silence)
  // and renews its place when due, then takes the lock when this waiter is first and the lock is
  // free. kBusy otherwise, with in *wait how long to sleep at most. The line's upkeep is
  // committed without fsync (after a crash no one waits any more), so a waiter costs the disk
  // nothing; only the grant is durable. A look that changes nothing takes no write lock.
  Result<Granted> TryInLine(std::string_view lock, std::string_view owner,
                            std::chrono::milliseconds ttl, Place& place,
                            std::chrono::milliseconds* wait,
                            std::chrono::steady_clock::time_point* valid_from)
      FENCEKIT_EXCLUDES(mu_);
  // Joins the line (when not `in_line`), drops waiters gone silent and renews this one's place
  // for `ttl`, in one transaction committed without fsync. REQUIRES: no transaction open.
  Status KeepPlace(std::string_view lock, std::string_view owner, std::chrono::milliseconds ttl,
                   Place& place, std::int64_t now, bool in_line) FENCEKIT_REQUIRES(mu_);
  // Gives up a place in line (a timeout, an error). When a release handed this waiter the lock
  // meanwhile, gives the lock back (to the next waiter). Failures only leave the place or the
  // lease to run out.
  void LeaveLine(std::string_view lock, std::string_view owner, const Place& place)
      FENCEKIT_EXCLUDES(mu_);
  // The lock was just freed: gives it to the first live waiter of its line, if any; that
  // waiter's ticket, or 0. REQUIRES: inside a transaction.
  Result<std::int64_t> HandOver(std::string_view lock, std::int64_t now) FENCEKIT_REQUIRES(mu_);

  // --- the lock's rules (backend.cc) ---
  Result<Holder> HolderOf(std::string_view lock, std::int64_t now) FENCEKIT_REQUIRES(mu_);
  // Bumps the counter and records the holder; commits `txn`.
  Result<Granted> GrantInTxn(std::string_view lock, std::string_view owner,
                             std::chrono::milliseconds ttl, std::int64_t now,
                             sqlite::Transaction& txn) FENCEKIT_REQUIRES(mu_);
  // Bumps the counter and records `owner` as the holder until now + ttl; the new token.
  // REQUIRES: inside a transaction.
  Result<std::int64_t> Record(std::string_view lock, std::string_view owner,
                              std::chrono::milliseconds ttl, std::int64_t now)
      FENCEKIT_REQUIRES(mu_);
  // REQUIRES: inside a transaction.
  Status WhyNotHeld(std::string_view lock, std::string_view owner, std::int64_t now)
      FENCEKIT_REQUIRES(mu_);
  Result<Granted> Grant(std::int64_t token);
  // The open transaction's destructor rolls it back.
  Status Fail(int rc, std::string_view doing) FENCEKIT_REQUIRES(mu_);
  std::int64_t NowMs() const;
  // SQLite's own busy handler sleeps 1, 2, 5, 10... ms between tries: a waiter handed the lock
  // would lose that much to a neighbour's short transaction. This one tries again after 50 us,
  // backing off to 1 ms, and gives up after 10 s (SQLITE_BUSY).
  // An I/O bound, on the steady clock: SQLite calls it within one statement. Unchecked: the
  // analysis cannot see that SQLite calls it from a statement run with mu_ held.
  static int OnBusy(void* self, int count) FENCEKIT_NO_THREAD_SAFETY_ANALYSIS;
  // After each commit, once the write lock is free again (SQLite's WAL hook): wakes the busy
  // handlers of all processes, so that a process joining the line is not kept out by one that
  // releases and re-takes the lock in a tight loop. Checkpoints as SQLite's default hook (which
  // this one replaces) does.
  static int OnCommitted(void* self, sqlite3* db, const char* name, int wal_pages);

  std::string path_;
  std::string service_;
  std::string service_id_;  // "sqlite:<32 hex>", kept in the database; set by Init
  Clock* clock_;
  WakeBoard wake_;
  std::chrono::steady_clock::time_point busy_since_ FENCEKIT_GUARDED_BY(mu_);  // see OnBusy
  Mutex mu_;
  sqlite::Db db_ FENCEKIT_GUARDED_BY(mu_);
  sqlite::TxnStatements txn_ FENCEKIT_GUARDED_BY(mu_);
  sqlite::Stmt select_lock_ FENCEKIT_GUARDED_BY(mu_), bump_counter_ FENCEKIT_GUARDED_BY(mu_),
      put_lock_ FENCEKIT_GUARDED_BY(mu_), extend_ FENCEKIT_GUARDED_BY(mu_),
      delete_ FENCEKIT_GUARDED_BY(mu_), select_counter_ FENCEKIT_GUARDED_BY(mu_),
      join_line_ FENCEKIT_GUARDED_BY(mu_), next_waiter_ FENCEKIT_GUARDED_BY(mu_),
      beat_ FENCEKIT_GUARDED_BY(mu_), leave_line_ FENCEKIT_GUARDED_BY(mu_),
      drop_stale_ FENCEKIT_GUARDED_BY(mu_), first_waiter_ FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit::lockclient
