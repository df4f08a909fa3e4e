#include "sqlite/reads.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "fencekit/common/mutex.h"
#include "sqlite/connection.h"
#include "sqlite/history_run.h"
#include "sqlite/sqlite_util.h"

namespace fencekit::fencedstore {

using sqlite::Stmt;

struct SqliteReads::Reader {
  sqlite::Db db;
  Stmt get, fence, runs, history;
  // A listing's scan: [inclusive][bounded above], so that each uses the key's index as a range.
  Stmt list[2][2];
};

SqliteReads::SqliteReads(const StoreOptions& options) : options_(options) {}

SqliteReads::~SqliteReads() = default;

template <typename F>
auto SqliteReads::WithReader(F&& f) -> decltype(f(std::declval<Reader&>())) {
  std::unique_ptr<Reader> r;
  {
    MutexLock lock(mu_);
    if (closed_) return Status::Unavailable("the store is closed");
    if (!readers_.empty()) {
      r = std::move(readers_.back());
      readers_.pop_back();
    }
  }
  if (r == nullptr) {
    auto made = MakeReader();
    if (!made.ok()) return made.status();
    r = std::move(made).value();
  }
  auto result = f(*r);
  MutexLock lock(mu_);
  if (readers_.size() < 16) readers_.push_back(std::move(r));
  return result;
}

Result<StoredObject> SqliteReads::Get(std::string_view key) {
  return WithReader([&](Reader& r) -> Result<StoredObject> {
    sqlite::ResetOnExit reset(r.get);
    r.get.BindBlob(1, key);
    int rc = r.get.Step();
    if (rc == SQLITE_DONE) return Status::NotFound("no object is stored under this key");
    if (rc != SQLITE_ROW) return sqlite::Error(r.db.get(), rc, "reading an object");
    auto token = FencingToken::FromInt(r.get.ColumnInt(2));
    if (!token.ok())
      return Status::Internal("stored token is invalid: " + token.status().message());
    return StoredObject{r.get.ColumnBytes(0), r.get.ColumnBytes(1), *token, r.get.ColumnInt(3)};
  });
}

Result<ObjectPage> SqliteReads::List(const KeyRange& range, std::size_t limit) {
  return WithReader([&](Reader& r) -> Result<ObjectPage> {
    Stmt& st = r.list[range.inclusive ? 1 : 0][range.to ? 1 : 0];
    sqlite::ResetOnExit reset(st);
    st.BindBlob(1, range.from);
    if (range.to) st.BindBlob(2, *range.to);
    st.BindInt(3, static_cast<sqlite3_int64>(limit) + 1);
    ObjectPage page;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      if (page.objects.size() == limit) {
        page.next = page.objects.back().key;
        break;
      }
      auto token = FencingToken::FromInt(st.ColumnInt(2));
      if (!token.ok()) {
        return Status::Internal("stored token is invalid: " + token.status().message());
      }
      page.objects.push_back(
          ObjectInfo{st.ColumnBytes(0), st.ColumnBytes(1), *token, st.ColumnInt(3)});
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      return sqlite::Error(r.db.get(), rc, "listing objects");
    }
    return page;
  });
}

Result<std::optional<FenceState>> SqliteReads::Fence(std::string_view lock) {
  return WithReader([&](Reader& r) -> Result<std::optional<FenceState>> {
    sqlite::ResetOnExit reset(r.fence);
    r.fence.BindBlob(1, lock);
    int rc = r.fence.Step();
    if (rc == SQLITE_DONE) return std::optional<FenceState>();
    if (rc != SQLITE_ROW) return sqlite::Error(r.db.get(), rc, "reading a fence");
    auto token = FencingToken::FromInt(r.fence.ColumnInt(0));
    if (!token.ok()) return token.status();
    return std::optional<FenceState>(FenceState{*token, r.fence.ColumnBytes(1)});
  });
}

Result<std::vector<Decision>> SqliteReads::History(std::size_t limit) {
  return WithReader([&](Reader& r) -> Result<std::vector<Decision>> {
    std::vector<Decision> out;  // newest first, until reversed at the end
    // The runs (schema 4) hold the newest decisions; the history table only older ones.
    {
      sqlite::ResetOnExit reset(r.runs);
      std::vector<Decision> run;
      int rc = SQLITE_DONE;
      while (out.size() < limit && (rc = r.runs.Step()) == SQLITE_ROW) {
        run.clear();
        auto time =
            std::chrono::system_clock::time_point(std::chrono::milliseconds(r.runs.ColumnInt(1)));
        if (auto s = DecodeHistoryRun(r.runs.ColumnBytes(2), r.runs.ColumnInt(0), time, &run);
            !s.ok()) {
          return s;
        }
        for (auto d = run.rbegin(); d != run.rend() && out.size() < limit; ++d) {
          out.push_back(std::move(*d));
        }
      }
      if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return sqlite::Error(r.db.get(), rc, "reading the history");
      }
    }
    if (out.size() < limit) {
      sqlite::ResetOnExit reset(r.history);
      r.history.BindInt(1, static_cast<sqlite3_int64>(std::min<std::size_t>(
                               limit - out.size(), static_cast<std::size_t>(INT64_MAX))));
      int rc;
      while ((rc = r.history.Step()) == SQLITE_ROW) {
        Decision d;
        d.seq = r.history.ColumnInt(0);
        d.time = std::chrono::system_clock::time_point(
            std::chrono::milliseconds(r.history.ColumnInt(1)));
        d.op = r.history.ColumnBytes(2);
        d.lock = r.history.ColumnBytes(3);
        d.token = r.history.ColumnInt(4);
        d.key = r.history.ColumnBytes(5);
        d.accepted = r.history.ColumnInt(6) != 0;
        d.highest = r.history.ColumnInt(7);
        d.reason = r.history.ColumnBytes(8);
        d.principal = r.history.ColumnBytes(9);
        out.push_back(std::move(d));
      }
      if (rc != SQLITE_DONE) return sqlite::Error(r.db.get(), rc, "reading the history");
    }
    std::reverse(out.begin(), out.end());
    return out;
  });
}

void SqliteReads::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  readers_.clear();
}

Result<std::unique_ptr<SqliteReads::Reader>> SqliteReads::MakeReader() {
  auto db = OpenConnection(options_, true);
  if (!db.ok()) return db.status();
  auto r = std::make_unique<Reader>();
  r->db = std::move(db).value();
  struct {
    Stmt* stmt;
    const char* sql;
  } stmts[] = {
      {&r->get, "SELECT value, lock, token, version FROM objects WHERE key = ?1"},
      {&r->fence, "SELECT highest, service FROM fences WHERE lock = ?1"},
      {&r->runs, "SELECT last_seq, time_ms, decisions FROM history_runs ORDER BY last_seq DESC"},
      {&r->history,
       "SELECT seq, time_ms, op, lock, token, key, accepted, highest, reason, principal "
       "FROM history "
       "ORDER BY seq DESC LIMIT ?1"},
  };
  for (auto& [stmt, sql] : stmts) {
    auto st = Stmt::Prepare(r->db.get(), sql);
    if (!st.ok()) return st.status();
    *stmt = std::move(st).value();
  }
  for (int inclusive = 0; inclusive < 2; ++inclusive) {
    for (int bounded = 0; bounded < 2; ++bounded) {
      std::string sql = std::string("SELECT key, lock, token, version FROM objects WHERE key ") +
                        (inclusive ? ">=" : ">") + " ?1" + (bounded ? " AND key < ?2" : "") +
                        " ORDER BY key LIMIT ?3";
      auto st = Stmt::Prepare(r->db.get(), sql);
      if (!st.ok()) return st.status();
      r->list[inclusive][bounded] = std::move(st).value();
    }
  }
  return r;
}

}  // namespace fencekit::fencedstore
