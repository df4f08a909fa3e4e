#include "sqlite/sqlite_util.h"

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

}  // namespace fencekit::sqlite
