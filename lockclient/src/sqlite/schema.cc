// Opening the embedded lock service's database: its schema, the migrations from older
// versions, the statements (see sqlite/backend.h).
#include <sqlite3.h>

#include "fencekit/common/names.h"
#include "random_id.h"
#include "sqlite/backend.h"

namespace fencekit::lockclient {
namespace {

using sqlite::Stmt;

constexpr int kApplicationId = 0x464C434B;  // 'FLCK'
// 1: locks and counters. 2: the service table, holding the database's service id. 3: the line
// of waiters.
constexpr int kSchemaVersion = 3;

}  // namespace

Status SqliteBackend::Init() {
  MutexLock guard(mu_);  // not shared yet: for the analysis, which checks every use of db_
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
      {&join_line_, "INSERT INTO waiters(name, owner, ttl_ms, expires_ms) VALUES(?1, ?2, ?3, ?4)"},
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

Status SqliteBackend::MigrateAndReadServiceId(sqlite3* raw) {
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

}  // namespace fencekit::lockclient
