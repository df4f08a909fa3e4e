#include "sqlite/schema.h"

#include "sqlite/sqlite_util.h"

namespace fencekit::fencedstore {
namespace {

using sqlite::Stmt;

// 'FENC' in PRAGMA application_id marks a fencekit store.
constexpr int kApplicationId = 0x46454E43;

// Forward migrations: kMigrations[i] takes the schema from user_version i to i + 1.
constexpr const char* kMigrations[] = {
    // 0 -> 1
    "CREATE TABLE fences("
    "  lock BLOB PRIMARY KEY NOT NULL,"
    "  highest INTEGER NOT NULL CHECK (highest >= 1)) WITHOUT ROWID;"
    "CREATE TABLE objects("
    "  key BLOB PRIMARY KEY NOT NULL,"
    "  value BLOB NOT NULL,"
    "  lock BLOB NOT NULL,"
    "  token INTEGER NOT NULL,"
    "  version INTEGER NOT NULL);"
    "CREATE TABLE history("
    "  seq INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  op TEXT NOT NULL,"
    "  lock BLOB NOT NULL,"
    "  token INTEGER NOT NULL,"
    "  key BLOB NOT NULL,"
    "  accepted INTEGER NOT NULL,"
    "  highest INTEGER NOT NULL);",
    // 1 -> 2: a fence's lock service and whether that service confirmed the fence's token
    // (verification on advance); a decision's reason of refusal and principal.
    "ALTER TABLE fences ADD COLUMN service TEXT;"
    "ALTER TABLE fences ADD COLUMN confirmed INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE history ADD COLUMN reason TEXT;"
    "ALTER TABLE history ADD COLUMN principal TEXT;",
    // 2 -> 3: versions from a store-wide counter, so that a key created again after a delete
    // never repeats a version (an ETag). Versions given before, to keys deleted since, are not
    // known: the counter starts above every version still stored.
    ("CREATE TABLE counters(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;"
     "INSERT INTO counters VALUES('version', (SELECT coalesce(max(version), 0) FROM objects));"),
    // 3 -> 4: a transaction's decisions as one row (sqlite/history_run.h). The history table
    // keeps the decisions recorded before, which are trimmed as before.
    "CREATE TABLE history_runs("
    "  last_seq INTEGER PRIMARY KEY,"
    "  time_ms INTEGER NOT NULL,"
    "  decisions BLOB NOT NULL);",
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

Result<int> QueryInt(sqlite3* db, const char* sql) {
  auto st = Stmt::Prepare(db, sql);
  if (!st.ok()) return st.status();
  int rc = st->Step();
  if (rc != SQLITE_ROW) return sqlite::Error(db, rc, sql);
  return static_cast<int>(st->ColumnInt(0));
}

}  // namespace

Status Migrate(sqlite3* db, sqlite::TxnStatements& txn_stmts, const std::string& path) {
  // WAL lets readers run beside the writer, and needs one fsync per commit.
  if (auto s = sqlite::UseWal(db, "the store database \"" + path + "\""); !s.ok()) return s;
  auto txn = sqlite::Transaction::Begin(txn_stmts);
  if (!txn.ok()) return txn.status();
  auto app_id = QueryInt(db, "PRAGMA application_id");
  auto version = QueryInt(db, "PRAGMA user_version");
  auto tables = QueryInt(db, "SELECT count(*) FROM sqlite_schema");
  if (!app_id.ok()) return app_id.status();
  if (!version.ok()) return version.status();
  if (!tables.ok()) return tables.status();
  bool ours = *app_id == kApplicationId;
  if (!ours && (*app_id != 0 || *tables != 0)) {
    return Status::InvalidArgument(
        "\"" + path +
        "\" is an SQLite database but not a fencekit store; pass the path of a "
        "fencekit store, or of a file that does not exist yet");
  }
  if (*version > kSchemaVersion) {
    return Status::InvalidArgument(
        "the store \"" + path + "\" has schema version " + std::to_string(*version) +
        ", written by a newer fencekit; this build knows versions up to " +
        std::to_string(kSchemaVersion) + ". Run a newer fenced");
  }
  for (int v = *version; v < kSchemaVersion; ++v) {
    if (auto s = sqlite::Exec(db, kMigrations[v]); !s.ok()) return s;
  }
  std::string set = "PRAGMA application_id=" + std::to_string(kApplicationId) +
                    ";PRAGMA user_version=" + std::to_string(kSchemaVersion) + ";";
  if (auto s = sqlite::Exec(db, set); !s.ok()) return s;
  return txn->Commit();
}

}  // namespace fencekit::fencedstore
