// The embedded lock service: a lock table and a per-lock token counter in one SQLite file.
// Safe across processes on one machine (SQLite's file locks serialise the transactions) and
// durable (WAL + synchronous=FULL: after a crash the counter never goes back).
// Expiry times are stored on the wall clock of the injected Clock, since processes share it.
#include <sqlite3.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>

#include "backend.h"
#include "fencekit/common/names.h"
#include "random_id.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"

namespace fencekit {
namespace {

using sqlite::Stmt;
using std::chrono::milliseconds;

constexpr int kApplicationId = 0x464C434B;  // 'FLCK'
// 1: locks and counters. 2: the service table, holding the database's service id.
constexpr int kSchemaVersion = 2;

// Wakes waiters in this process at once when a lock of the same file is released; waiters in
// other processes poll.
struct ReleaseSignal {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t generation = 0;
};

std::shared_ptr<ReleaseSignal> SignalFor(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<ReleaseSignal>> signals;
  std::lock_guard lock(mu);
  auto& weak = signals[path];
  auto strong = weak.lock();
  if (!strong) {
    strong = std::make_shared<ReleaseSignal>();
    weak = strong;
  }
  return strong;
}

class SqliteBackend final : public LockBackend {
 public:
  SqliteBackend(std::string path, const LockOptions& options)
      : path_(std::move(path)),
        service_("sqlite://" + path_),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        signal_(SignalFor(path_)) {}

  Status Init() {
    sqlite3* raw = nullptr;
    int rc =
        sqlite3_open_v2(path_.c_str(), &raw,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    db_ = sqlite::Db(raw);
    if (rc != SQLITE_OK) return sqlite::Error(raw, rc, "opening the lock database " + service_);
    sqlite3_extended_result_codes(raw, 1);
    sqlite3_busy_timeout(raw, 10'000);
    if (auto s = sqlite::Exec(raw, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"); !s.ok()) {
      return s;
    }
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
        {&delete_, "DELETE FROM locks WHERE name = ?1 AND owner = ?2 AND token = ?3"},
        {&select_counter_, "SELECT token FROM counters WHERE name = ?1"},
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
    bump_counter_.BindBlob(1, lock);
    rc = bump_counter_.Step();
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
    if (auto s = txn->Commit(); !s.ok()) return s;
    return Grant(token);
  }

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
    if (auto s = txn->Commit(); !s.ok()) return s;
    guard.unlock();
    {
      std::lock_guard lock_signal(signal_->mu);
      ++signal_->generation;
    }
    signal_->cv.notify_all();
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
    // Other processes cannot signal us, so poll the lock row with jittered backoff; a release
    // in this process wakes us at once.
    thread_local std::minstd_rand rng(std::random_device{}());
    auto deadline = std::chrono::steady_clock::now() + max_wait;
    milliseconds step(1);
    std::unique_lock lock_signal(signal_->mu);
    std::uint64_t seen = signal_->generation;
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return;
      auto nap = std::min<std::chrono::steady_clock::duration>(
          deadline - now, step + milliseconds(rng() % (step.count() + 1)));
      if (signal_->cv.wait_for(lock_signal, nap, [&] { return signal_->generation != seen; })) {
        return;
      }
      lock_signal.unlock();
      bool free = IsFree(lock);
      lock_signal.lock();
      if (free) return;
      step = std::min(step * 2, milliseconds(8));
    }
  }

  const std::string& service() const override { return service_; }

 private:
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

  bool IsFree(std::string_view lock) {
    std::lock_guard guard(mu_);
    sqlite::ResetOnExit reset(select_lock_);
    select_lock_.BindBlob(1, lock);
    int rc = select_lock_.Step();
    return rc == SQLITE_DONE || (rc == SQLITE_ROW && select_lock_.ColumnInt(2) <= NowMs());
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
  std::shared_ptr<ReleaseSignal> signal_;
  std::mutex mu_;
  sqlite::Db db_;  // GUARDED_BY(mu_), with every statement below
  sqlite::TxnStatements txn_;
  Stmt select_lock_, bump_counter_, put_lock_, extend_, delete_, select_counter_;
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
