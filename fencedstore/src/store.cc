// The SQLite implementation of FencedStore: one writer thread doing group commit, and a pool of
// read-only connections for Get/Highest/History.
#include "fencekit/fencedstore/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "fencekit/common/names.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"

namespace fencekit {
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
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);


Result<int> QueryInt(sqlite3* db, const char* sql) {
  auto st = Stmt::Prepare(db, sql);
  if (!st.ok()) return st.status();
  int rc = st->Step();
  if (rc != SQLITE_ROW) return sqlite::Error(db, rc, sql);
  return static_cast<int>(st->ColumnInt(0));
}

Result<sqlite::Db> OpenConnection(const StoreOptions& o, bool read_only) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (!read_only) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(o.path.c_str(), &raw, flags,
                           o.sqlite_vfs.empty() ? nullptr : o.sqlite_vfs.c_str());
  sqlite::Db db(raw);
  if (rc != SQLITE_OK) {
    return sqlite::Error(raw, rc, "opening the store database \"" + o.path + "\"");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, 5000);
  std::string pragmas = "PRAGMA synchronous=";
  pragmas += o.durability == Durability::kFull ? "FULL;" : "NORMAL;";
  if (read_only) pragmas += "PRAGMA query_only=1;";
  if (auto s = sqlite::Exec(raw, pragmas); !s.ok()) return s;
  return db;
}

Status Migrate(sqlite3* db, sqlite::TxnStatements& txn_stmts, const std::string& path) {
  // WAL lets readers run beside the writer, and needs one fsync per commit.
  {
    auto st = Stmt::Prepare(db, "PRAGMA journal_mode=WAL");
    if (!st.ok()) return st.status();
    int rc = st->Step();
    if (rc != SQLITE_ROW) return sqlite::Error(db, rc, "switching to WAL mode");
    if (st->ColumnBytes(0) != "wal") {
      return Status::IoError("the store database \"" + path +
                             "\" cannot use WAL mode (journal_mode is " + st->ColumnBytes(0) +
                             "); put it on a local file system");
    }
  }
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
        "\"" + path + "\" is an SQLite database but not a fencekit store; pass the path of a "
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

struct Pending {
  WriteRequest request;
  FencedStore::WriteCallback done;
  Result<WriteReceipt> result = Status::Internal("write not processed");
  bool accepted = false;
  std::int64_t highest = 0;
};

class SqliteStore final : public FencedStore {
 public:
  explicit SqliteStore(StoreOptions o)
      : options_(std::move(o)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
        batch_buckets_(10) {}

  ~SqliteStore() override { (void)Close(); }

  Status Init() {
    if (options_.max_batch == 0) options_.max_batch = 1;
    auto db = OpenConnection(options_, false);
    if (!db.ok()) return db.status();
    writer_db_ = std::move(db).value();
    sqlite3* w = writer_db_.get();
    auto txn = sqlite::TxnStatements::Prepare(w, sqlite::TxnMode::kImmediate,
                                              "the store database \"" + options_.path + "\"");
    if (!txn.ok()) return txn.status();
    txn_ = std::move(txn).value();
    if (auto s = Migrate(w, txn_, options_.path); !s.ok()) return s;
    // No RETURNING on the hot path: SQLite materialises RETURNING rows in a temporary table
    // on every execution, which costs more than a second point lookup.
    const char* cmp = options_.strict ? ">" : ">=";
    std::string fence_sql =
        options_.unguarded
            ? "UPDATE fences SET highest = max(highest, ?2) WHERE lock = ?1"
            : "UPDATE fences SET highest = ?2 WHERE lock = ?1 AND ?2 " + std::string(cmp) +
                  " highest";
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

  void Submit(WriteRequest request, WriteCallback done) override {
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

  Result<StoredObject> Get(std::string_view key) override {
    if (auto s = CheckName("key", key, options_.max_key_bytes); !s.ok()) return s;
    return WithReader([&](Reader& r) -> Result<StoredObject> {
      sqlite::ResetOnExit reset(r.get);
      r.get.BindBlob(1, key);
      int rc = r.get.Step();
      if (rc == SQLITE_DONE) return Status::NotFound("no object is stored under this key");
      if (rc != SQLITE_ROW) return sqlite::Error(r.db.get(), rc, "reading an object");
      auto token = FencingToken::FromInt(r.get.ColumnInt(2));
      if (!token.ok()) return Status::Internal("stored token is invalid: " + token.status().message());
      return StoredObject{r.get.ColumnBytes(0), r.get.ColumnBytes(1), *token, r.get.ColumnInt(3)};
    });
  }

  Result<std::optional<FencingToken>> Highest(std::string_view lock) override {
    if (auto s = CheckName("lock name", lock, options_.max_key_bytes); !s.ok()) return s;
    return WithReader([&](Reader& r) -> Result<std::optional<FencingToken>> {
      sqlite::ResetOnExit reset(r.fence);
      r.fence.BindBlob(1, lock);
      int rc = r.fence.Step();
      if (rc == SQLITE_DONE) return std::optional<FencingToken>();
      if (rc != SQLITE_ROW) return sqlite::Error(r.db.get(), rc, "reading a fence");
      auto token = FencingToken::FromInt(r.fence.ColumnInt(0));
      if (!token.ok()) return token.status();
      return std::optional<FencingToken>(*token);
    });
  }

  Result<std::vector<Decision>> History(std::size_t limit) override {
    return WithReader([&](Reader& r) -> Result<std::vector<Decision>> {
      sqlite::ResetOnExit reset(r.history);
      r.history.BindInt(1, static_cast<sqlite3_int64>(std::min<std::size_t>(limit, INT64_MAX)));
      std::vector<Decision> out;
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
        out.push_back(std::move(d));
      }
      if (rc != SQLITE_DONE) return sqlite::Error(r.db.get(), rc, "reading the history");
      std::reverse(out.begin(), out.end());
      return out;
    });
  }

  StoreStats Stats() const override {
    StoreStats s;
    s.accepted = accepted_.load(std::memory_order_relaxed);
    s.refused_stale = refused_.load(std::memory_order_relaxed);
    s.failed = failed_.load(std::memory_order_relaxed);
    s.commits = commits_.load(std::memory_order_relaxed);
    for (const auto& b : batch_buckets_) s.batch_size_buckets.push_back(b.load());
    return s;
  }

  Status Close() override {
    {
      std::lock_guard lock(mu_);
      if (closing_ && !writer_.joinable()) return Status::Ok();
      closing_ = true;
    }
    cv_.notify_one();
    if (writer_.joinable()) writer_.join();
    // Statements must be finalized before their connection closes.
    txn_ = sqlite::TxnStatements();
    for (Stmt* st : {&advance_fence_, &read_fence_, &insert_fence_, &read_version_,
                     &upsert_object_, &delete_object_, &insert_history_, &trim_history_}) {
      *st = Stmt();
    }
    {
      std::lock_guard lock(readers_mu_);
      readers_.clear();
    }
    writer_db_ = sqlite::Db();
    return Status::Ok();
  }

 private:
  struct Reader {
    sqlite::Db db;
    Stmt get, fence, history;
  };

  template <typename F>
  auto WithReader(F&& f) -> decltype(f(std::declval<Reader&>())) {
    std::unique_ptr<Reader> r;
    {
      std::lock_guard lock(readers_mu_);
      if (closed_readers_) return Status::Unavailable("the store is closed");
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
    std::lock_guard lock(readers_mu_);
    if (readers_.size() < 16) readers_.push_back(std::move(r));
    return result;
  }

  Result<std::unique_ptr<Reader>> MakeReader() {
    auto db = OpenConnection(options_, true);
    if (!db.ok()) return db.status();
    auto r = std::make_unique<Reader>();
    r->db = std::move(db).value();
    struct {
      Stmt* stmt;
      const char* sql;
    } stmts[] = {
        {&r->get, "SELECT value, lock, token, version FROM objects WHERE key = ?1"},
        {&r->fence, "SELECT highest FROM fences WHERE lock = ?1"},
        {&r->history,
         "SELECT seq, time_ms, op, lock, token, key, accepted, highest FROM history "
         "ORDER BY seq DESC LIMIT ?1"},
    };
    for (auto& [stmt, sql] : stmts) {
      auto st = Stmt::Prepare(r->db.get(), sql);
      if (!st.ok()) return st.status();
      *stmt = std::move(st).value();
    }
    return r;
  }

  void WriterLoop() {
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
    std::lock_guard lock(readers_mu_);
    closed_readers_ = true;
  }

  // Decides and applies every write of `batch` in one transaction. On any storage error the
  // transaction is rolled back and every write of the batch fails: nothing is acknowledged.
  void CommitBatch(std::vector<Pending>& batch) {
    sqlite3* db = writer_db_.get();
    Status failure = Status::Ok();
    auto fail_with = [&](Stmt& st, int rc, std::string_view doing) {
      failure = sqlite::Error(db, rc, doing);
      st.Reset();
    };
    auto txn = sqlite::Transaction::Begin(txn_);
    if (!txn.ok()) failure = txn.status();
    std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              clock_->WallNow().time_since_epoch())
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
                "\" is stale: the store has already accepted token " +
                std::to_string(p.highest) +
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

  StoreOptions options_;
  Clock* clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  bool closing_ = false;       // GUARDED_BY(mu_)
  std::thread writer_;

  // Used only by the writer thread (and by Init/Close when it is not running).
  sqlite::Db writer_db_;
  sqlite::TxnStatements txn_;
  Stmt advance_fence_, read_fence_, insert_fence_, read_version_, upsert_object_, delete_object_,
      insert_history_, trim_history_;

  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Reader>> readers_;  // GUARDED_BY(readers_mu_)
  bool closed_readers_ = false;                   // GUARDED_BY(readers_mu_)

  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, failed_{0}, commits_{0};
  std::vector<std::atomic<std::uint64_t>> batch_buckets_;
};

}  // namespace

Result<std::unique_ptr<FencedStore>> FencedStore::Open(StoreOptions options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("no database path given; set StoreOptions::path");
  }
  auto store = std::make_unique<SqliteStore>(std::move(options));
  if (auto s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<FencedStore>(std::move(store));
}

Result<WriteReceipt> FencedStore::Put(std::string_view lock, FencingToken token,
                                      std::string_view key, std::string_view value) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(WriteRequest{WriteRequest::Kind::kPut, std::string(lock), token, std::string(key),
                      std::string(value)},
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<WriteReceipt> FencedStore::Delete(std::string_view lock, FencingToken token,
                                         std::string_view key) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(WriteRequest{WriteRequest::Kind::kDelete, std::string(lock), token, std::string(key), {}},
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace fencekit
