#include "sqlite/connection.h"

#include <sqlite3.h>

#include <string>

#include "sqlite/engine.h"
#include "sqlite/reads.h"
#include "sqlite/schema.h"
#include "sqlite/transaction.h"
#include "sqlite/wal_write_batching.h"

namespace fencekit::fencedstore {

Result<sqlite::Db> OpenConnection(const StoreOptions& o, bool read_only) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (!read_only) flags |= SQLITE_OPEN_CREATE;
  // The writer's WAL appends go out in one write per commit (wal_write_batching.h), which needs
  // the sync at every commit of Durability::kFull.
  std::string vfs = o.sqlite_vfs;
  if (!read_only && o.durability == Durability::kFull) {
    auto batching = WalWriteBatchingVfs(o.sqlite_vfs);
    if (!batching.ok()) return batching.status();
    vfs = std::move(batching).value();
  }
  int rc = sqlite3_open_v2(o.path.c_str(), &raw, flags, vfs.empty() ? nullptr : vfs.c_str());
  sqlite::Db db(raw);
  if (rc != SQLITE_OK) {
    return sqlite::Error(raw, rc, "opening the store database \"" + o.path + "\"");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, 5000);
  std::string pragmas = "PRAGMA synchronous=";
  pragmas += o.durability == Durability::kFull ? "FULL;" : "NORMAL;";
  if (read_only) pragmas += "PRAGMA query_only=1;";
  // The writer checkpoints once the WAL holds 4,000 pages (16 MiB) rather than SQLite's 1,000:
  // a checkpoint costs two fsyncs and rewrites every page changed since the last, and at 1,000
  // pages the writer checkpointed every ~140 commits of small writes.
  if (!read_only) pragmas += "PRAGMA wal_autocheckpoint=4000;";
  if (auto s = sqlite::Exec(raw, pragmas); !s.ok()) return s;
  return db;
}

Result<Storage> OpenSqliteStorage(const StoreOptions& options) {
  auto db = OpenConnection(options, false);
  if (!db.ok()) return db.status();
  sqlite3* w = db->get();
  auto txn = sqlite::TxnStatements::Prepare(w, sqlite::TxnMode::kImmediate,
                                            "the store database \"" + options.path + "\"");
  if (!txn.ok()) return txn.status();
  if (auto s = Migrate(w, *txn, options.path); !s.ok()) return s;
  auto engine = SqliteEngine::Make(options, std::move(db).value(), std::move(txn).value());
  if (!engine.ok()) return engine.status();
  return Storage{std::move(engine).value(), std::make_unique<SqliteReads>(options)};
}

}  // namespace fencekit::fencedstore
