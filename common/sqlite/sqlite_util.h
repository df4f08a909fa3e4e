// Thin RAII helpers over the SQLite C API, shared privately by fencedstore and lockclient.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit::sqlite {

// Owns a sqlite3 connection. Thread safety: one thread at a time.
class Db {
 public:
  Db() = default;
  explicit Db(sqlite3* db) : db_(db) {}
  Db(Db&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept {
    std::swap(db_, o.db_);
    return *this;
  }
  ~Db() {
    if (db_ != nullptr) sqlite3_close_v2(db_);
  }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// Owns a prepared statement and resets it after each use. Thread safety: one thread at a time.
class Stmt {
 public:
  Stmt() = default;
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~Stmt() {
    if (s_ != nullptr) sqlite3_finalize(s_);
  }
  static Result<Stmt> Prepare(sqlite3* db, std::string_view sql);

  void BindBlob(int i, std::string_view bytes) {
    // A zero-length blob needs a non-null pointer, or SQLite stores NULL.
    sqlite3_bind_blob64(s_, i, bytes.empty() ? "" : bytes.data(), bytes.size(), SQLITE_STATIC);
  }
  void BindText(int i, std::string_view text) {
    sqlite3_bind_text64(s_, i, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  void BindInt(int i, sqlite3_int64 v) { sqlite3_bind_int64(s_, i, v); }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(s_); }
  // Callers bind every parameter before each step, so bindings need no clearing.
  void Reset() { sqlite3_reset(s_); }
  std::string ColumnBytes(int i) const {
    const void* p = sqlite3_column_blob(s_, i);
    int n = sqlite3_column_bytes(s_, i);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }
  sqlite3_int64 ColumnInt(int i) const { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
};

// Resets the statement when the scope ends, so it never holds a read snapshot open.
class ResetOnExit {
 public:
  explicit ResetOnExit(Stmt& s) : s_(s) {}
  ~ResetOnExit() { s_.Reset(); }

 private:
  Stmt& s_;
};

// A Status for SQLite result code `rc` on `db`, prefixed by what was being done.
Status Error(sqlite3* db, int rc, std::string_view doing);

// Runs SQL that returns no rows.
Status Exec(sqlite3* db, std::string_view sql);

// Puts `db` in WAL mode. Another process that opens or converts the same new file at that moment
// makes SQLite answer SQLITE_BUSY at once (its busy handler is not asked), so this tries again,
// backing off from 1 ms to 50 ms, for up to `max_wait`. kIoError when the file system cannot
// hold a WAL (journal_mode stays another); `database` names the file in messages.
Status UseWal(sqlite3* db, std::string_view database,
              std::chrono::milliseconds max_wait = std::chrono::seconds(10));

}  // namespace fencekit::sqlite
