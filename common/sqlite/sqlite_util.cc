#include "sqlite/sqlite_util.h"

#include <algorithm>
#include <thread>

namespace fencekit::sqlite {

Result<Stmt> Stmt::Prepare(sqlite3* db, std::string_view sql) {
  Stmt st;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &st.s_, nullptr);
  if (rc != SQLITE_OK) return Error(db, rc, "preparing \"" + std::string(sql) + "\"");
  return st;
}

Status Error(sqlite3* db, int rc, std::string_view doing) {
  std::string msg = "SQLite failed while " + std::string(doing) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errcode(db) == rc) {
    msg += " (";
    msg += sqlite3_errmsg(db);
    msg += ")";
  }
  switch (rc & 0xff) {
    case SQLITE_FULL:
      msg += "; free disk space on the database's file system and retry";
      return Status::IoError(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      msg += "; check that the database file and its folder are writable";
      return Status::IoError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      msg += "; another process holds the database lock, retry later";
      return Status::Unavailable(msg);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      msg += "; the file is not a usable SQLite database";
      return Status::IoError(msg);
    default:
      return Status::IoError(msg);
  }
}

Status Exec(sqlite3* db, std::string_view sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return Error(db, rc, "running \"" + std::string(sql) + "\"");
  return Status::Ok();
}

Status UseWal(sqlite3* db, std::string_view database, std::chrono::milliseconds max_wait) {
  using std::chrono::milliseconds;
  auto st = Stmt::Prepare(db, "PRAGMA journal_mode=WAL");
  if (!st.ok()) return st.status();
  const auto give_up = std::chrono::steady_clock::now() + max_wait;
  int rc;
  for (milliseconds pause(1);; pause = std::min(pause * 2, milliseconds(50))) {
    rc = st->Step();
    if ((rc & 0xff) != SQLITE_BUSY) break;
    st->Reset();
    auto now = std::chrono::steady_clock::now();
    if (now >= give_up) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, give_up - now));
  }
  ResetOnExit reset(*st);
  if (rc != SQLITE_ROW) return Error(db, rc, "switching " + std::string(database) + " to WAL mode");
  if (std::string mode = st->ColumnBytes(0); mode != "wal") {
    return Status::IoError(std::string(database) + " cannot use WAL mode (journal_mode is " + mode +
                           "); put it on a local file system");
  }
  return Status::Ok();
}

}  // namespace fencekit::sqlite
