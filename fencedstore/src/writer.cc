#include "writer.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "fencekit/common/names.h"

namespace fencekit::fencedstore {

using sqlite::Stmt;

Writer::Writer(const StoreOptions& options, Clock* clock)
    : options_(options), clock_(clock), batch_buckets_(10) {}

Status Writer::Start(sqlite::Db db, sqlite::TxnStatements txn) {
  writer_db_ = std::move(db);
  txn_ = std::move(txn);
  sqlite3* w = writer_db_.get();
  // No RETURNING on the hot path: SQLite materialises RETURNING rows in a temporary table
  // on every execution, which costs more than a second point lookup.
  const char* cmp = options_.strict ? ">" : ">=";
  std::string fence_sql = options_.unguarded
                              ? "UPDATE fences SET highest = max(highest, ?2) WHERE lock = ?1"
                              : "UPDATE fences SET highest = ?2 WHERE lock = ?1 AND ?2 " +
                                    std::string(cmp) + " highest";
  struct {
    Stmt* stmt;
    std::string sql;
  } stmts[] = {
      {&advance_fence_, fence_sql},
      {&read_fence_, "SELECT highest FROM fences WHERE lock = ?1"},
      {&insert_fence_, "INSERT INTO fences(lock, highest) VALUES(?1, ?2)"},
      {&read_version_, "SELECT version FROM objects WHERE key = ?1"},
      {&upsert_object_,
       "INSERT INTO objects(key, value, lock, token, version) VALUES(?1, ?2, ?3, ?4, ?5) "
       "ON CONFLICT(key) DO UPDATE SET value = excluded.value, lock = excluded.lock, "
       "token = excluded.token, version = excluded.version"},
      {&delete_object_, "DELETE FROM objects WHERE key = ?1"},
      {&insert_history_,
       "INSERT INTO history(time_ms, op, lock, token, key, accepted, highest) "
       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
      {&trim_history_, "DELETE FROM history WHERE seq <= ?1"},
  };
  for (auto& [stmt, sql] : stmts) {
    auto st = Stmt::Prepare(w, sql);
    if (!st.ok()) return st.status();
    *stmt = std::move(st).value();
  }
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

void Writer::Submit(WriteRequest request, FencedStore::WriteCallback done) {
  Status bad = CheckName("key", request.key, options_.max_key_bytes);
  if (bad.ok()) bad = CheckName("lock name", request.lock, options_.max_key_bytes);
  if (!bad.ok()) {
    done(bad);
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      queue_.push_back(Pending{std::move(request), std::move(done)});
      if (queue_.size() == 1) cv_.notify_one();
      return;
    }
  }
  done(Status::Unavailable("the store is closed; writes are no longer accepted"));
}

StoreStats Writer::Stats() const {
  StoreStats s;
  s.accepted = accepted_.load(std::memory_order_relaxed);
  s.refused_stale = refused_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.commits = commits_.load(std::memory_order_relaxed);
  for (const auto& b : batch_buckets_) s.batch_size_buckets.push_back(b.load());
  return s;
}

bool Writer::Stop() {
  {
    std::lock_guard lock(mu_);
    if (closing_ && !writer_.joinable()) return false;
    closing_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
  // Statements must be finalized before their connection closes.
  txn_ = sqlite::TxnStatements();
  for (Stmt* st : {&advance_fence_, &read_fence_, &insert_fence_, &read_version_, &upsert_object_,
                   &delete_object_, &insert_history_, &trim_history_}) {
    *st = Stmt();
  }
  return true;
}

void Writer::CloseDatabase() { writer_db_ = sqlite::Db(); }

void Writer::WriterLoop() {
  std::vector<Pending> batch;
  batch.reserve(options_.max_batch);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
      if (queue_.empty()) break;
      std::size_t n = std::min(queue_.size(), options_.max_batch);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitBatch(batch);
    for (auto& p : batch) p.done(std::move(p.result));
    batch.clear();
  }
}

// Decides and applies every write of `batch` in one transaction. On any storage error the
// transaction is rolled back and every write of the batch fails: nothing is acknowledged.
void Writer::CommitBatch(std::vector<Pending>& batch) {
  sqlite3* db = writer_db_.get();
  Status failure = Status::Ok();
  auto fail_with = [&](Stmt& st, int rc, std::string_view doing) {
    failure = sqlite::Error(db, rc, doing);
    st.Reset();
  };
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) failure = txn.status();
  std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
          .count();
  std::int64_t last_seq = 0;
  for (auto& p : batch) {
    if (!failure.ok()) break;
    const WriteRequest& w = p.request;
    // 1. The fence: advance it iff the token is new enough (or create it).
    advance_fence_.BindBlob(1, w.lock);
    advance_fence_.BindInt(2, w.token.value());
    int rc = advance_fence_.Step();
    advance_fence_.Reset();
    if (rc != SQLITE_DONE) {
      fail_with(advance_fence_, rc, "checking the fence");
      break;
    }
    if (sqlite3_changes(db) == 1 && !options_.unguarded) {
      p.accepted = true;
      p.highest = w.token.value();
    } else {
      read_fence_.BindBlob(1, w.lock);
      rc = read_fence_.Step();
      if (rc == SQLITE_ROW) {
        p.highest = read_fence_.ColumnInt(0);
        p.accepted = options_.unguarded;
        read_fence_.Reset();
      } else if (rc == SQLITE_DONE) {  // the lock's first write
        read_fence_.Reset();
        insert_fence_.BindBlob(1, w.lock);
        insert_fence_.BindInt(2, w.token.value());
        rc = insert_fence_.Step();
        insert_fence_.Reset();
        if (rc != SQLITE_DONE) {
          fail_with(insert_fence_, rc, "creating the fence");
          break;
        }
        p.accepted = true;
        p.highest = w.token.value();
      } else {
        fail_with(read_fence_, rc, "reading the fence");
        break;
      }
    }
    // 2. The write itself.
    std::int64_t version = 0;
    bool created = false;
    if (p.accepted) {
      read_version_.BindBlob(1, w.key);
      rc = read_version_.Step();
      if (rc == SQLITE_ROW) version = read_version_.ColumnInt(0);
      read_version_.Reset();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        fail_with(read_version_, rc, "reading the object's version");
        break;
      }
    }
    if (p.accepted && w.kind == WriteRequest::Kind::kPut) {
      created = version == 0;
      ++version;
      upsert_object_.BindBlob(1, w.key);
      upsert_object_.BindBlob(2, w.value);
      upsert_object_.BindBlob(3, w.lock);
      upsert_object_.BindInt(4, w.token.value());
      upsert_object_.BindInt(5, version);
      rc = upsert_object_.Step();
      upsert_object_.Reset();
      if (rc != SQLITE_DONE) {
        fail_with(upsert_object_, rc, "writing the object");
        break;
      }
    } else if (p.accepted && version != 0) {
      delete_object_.BindBlob(1, w.key);
      rc = delete_object_.Step();
      delete_object_.Reset();
      if (rc != SQLITE_DONE) {
        fail_with(delete_object_, rc, "deleting the object");
        break;
      }
    }
    // 3. The record of the decision.
    if (options_.history_limit > 0) {
      insert_history_.BindInt(1, now_ms);
      insert_history_.BindText(2, w.kind == WriteRequest::Kind::kPut ? "put" : "delete");
      insert_history_.BindBlob(3, w.lock);
      insert_history_.BindInt(4, w.token.value());
      insert_history_.BindBlob(5, w.key);
      insert_history_.BindInt(6, p.accepted ? 1 : 0);
      insert_history_.BindInt(7, p.highest);
      rc = insert_history_.Step();
      if (rc != SQLITE_DONE) {
        fail_with(insert_history_, rc, "recording the decision");
        break;
      }
      insert_history_.Reset();
      last_seq = sqlite3_last_insert_rowid(db);
    }
    if (p.accepted) {
      p.result = WriteReceipt{w.key, w.lock, w.token, version, created};
    } else {
      p.result = Status::StaleToken(
          "fencing token " + w.token.ToString() + " for lock \"" + w.lock +
              "\" is stale: the store has already accepted token " + std::to_string(p.highest) +
              (options_.strict && p.highest == w.token.value()
                   ? " (strict mode allows one write per token)"
                   : "") +
              ". Your lease was lost; acquire the lock again to get a newer token",
          p.highest);
    }
  }
  if (failure.ok() && last_seq > static_cast<std::int64_t>(options_.history_limit) &&
      last_seq % 64 < static_cast<std::int64_t>(batch.size())) {
    // Trimming every ~64 records keeps the history bounded without a delete per commit.
    trim_history_.BindInt(1, last_seq - static_cast<std::int64_t>(options_.history_limit));
    int rc = trim_history_.Step();
    if (rc != SQLITE_DONE) fail_with(trim_history_, rc, "trimming the history");
    trim_history_.Reset();
  }
  if (failure.ok()) failure = txn->Commit();
  if (!failure.ok()) {
    if (txn.ok()) txn->Rollback();
    Status s = Status::IoError("the write was not stored: " + failure.message() +
                               ". Nothing in this batch was acknowledged; retry the write");
    if (failure.IsUnavailable()) s = Status::Unavailable(s.message());
    for (auto& p : batch) p.result = s;
    failed_.fetch_add(batch.size(), std::memory_order_relaxed);
    return;
  }
  commits_.fetch_add(1, std::memory_order_relaxed);
  std::size_t bucket = 0;
  while ((std::size_t{1} << bucket) < batch.size() && bucket + 1 < batch_buckets_.size()) {
    ++bucket;
  }
  batch_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  for (auto& p : batch) {
    (p.accepted ? accepted_ : refused_).fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace fencekit::fencedstore
