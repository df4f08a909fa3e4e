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
  // One statement checks the token, the service binding and (under verify) that a token moving
  // the fence up was confirmed, and moves the fence: ?1 lock, ?2 token, ?3 the write's service
  // (NULL when none: judged by its token alone; else it binds an unbound fence and must match a
  // bound one), ?4 whether the lock service confirmed the token.
  // No RETURNING on the hot path: SQLite materialises RETURNING rows in a temporary table
  // on every execution, which costs more than a second point lookup.
  const std::string service_ok = " AND (?3 IS NULL OR service IS NULL OR service = ?3)";
  std::string fence_sql;
  if (options_.unguarded) {
    fence_sql =
        "UPDATE fences SET highest = max(highest, ?2), service = coalesce(service, ?3) "
        "WHERE lock = ?1" +
        service_ok;
  } else {
    // Under verify only a confirmed write binds the fence to a service: anyone may send the
    // fence's current token (GET /v1/fences shows it), and must not bind the fence with it.
    // `confirmed` says the lock service confirmed the fence's current token: under verify a
    // write at the fence needs no call only then. Any unconfirmed move (a write without verify,
    // fence administration) clears it, so a token set by hand or before verify was on is checked
    // once more.
    fence_sql = std::string("UPDATE fences SET highest = ?2, service = coalesce(service, ") +
                (options_.verify ? "CASE WHEN ?4 THEN ?3 END" : "?3") + "), confirmed = CASE " +
                (options_.verify ? "WHEN ?4 THEN 1 " : "") +
                "WHEN ?2 = highest THEN confirmed ELSE 0 END WHERE lock = ?1 AND ?2 " +
                (options_.strict ? ">" : ">=") + " highest" + service_ok;
    if (options_.verify) {
      fence_sql += options_.strict ? " AND ?4" : " AND ((?2 = highest AND confirmed) OR ?4)";
    }
  }
  struct {
    Stmt* stmt;
    std::string sql;
  } stmts[] = {
      {&advance_fence_, fence_sql},
      {&read_fence_, "SELECT highest, service FROM fences WHERE lock = ?1"},
      {&insert_fence_,
       "INSERT INTO fences(lock, highest, service, confirmed) VALUES(?1, ?2, ?3, ?4)"},
      {&read_object_, "SELECT version, lock FROM objects WHERE key = ?1"},
      {&upsert_object_,
       "INSERT INTO objects(key, value, lock, token, version) VALUES(?1, ?2, ?3, ?4, ?5) "
       "ON CONFLICT(key) DO UPDATE SET value = excluded.value, lock = excluded.lock, "
       "token = excluded.token, version = excluded.version"},
      {&delete_object_, "DELETE FROM objects WHERE key = ?1"},
      {&insert_history_,
       "INSERT INTO history(time_ms, op, lock, token, key, accepted, highest, reason, principal) "
       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
      {&trim_history_, "DELETE FROM history WHERE seq <= ?1"},
      {&set_fence_,
       "INSERT INTO fences(lock, highest, service, confirmed) VALUES(?1, ?2, NULL, 0) "
       "ON CONFLICT(lock) DO UPDATE SET highest = excluded.highest, confirmed = 0, "
       "service = CASE WHEN ?3 THEN NULL ELSE service END"},
  };
  for (auto& [stmt, sql] : stmts) {
    auto st = Stmt::Prepare(w, sql);
    if (!st.ok()) return st.status();
    *stmt = std::move(st).value();
  }
  if (options_.verify) {
    verifier_ = std::make_unique<Verifier>(options_.verify, options_.verify_threads,
                                           options_.max_queued_verifications);
  }
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

void Writer::Submit(WriteRequest request, FencedStore::WriteCallback done) {
  Status bad = CheckName("key", request.key, options_.max_key_bytes);
  if (bad.ok()) bad = CheckName("lock name", request.lock, options_.max_key_bytes);
  if (bad.ok() && !request.service.empty()) bad = CheckServiceId(request.service);
  if (bad.ok() && request.service.empty() && options_.require_service) {
    bad = Status::InvalidArgument(
        "this store requires the identity of the lock service that granted the token with "
        "every write; send the lease's service (the Fencing-Service header)");
  }
  if (!bad.ok()) {
    done(bad);
    return;
  }
  Pending p{std::move(request), std::move(done)};
  std::size_t longest = 0;
  for (const auto& [prefix, lock] : options_.lock_for) {
    if (p.request.key.starts_with(prefix) &&
        (p.prefix_lock == nullptr || prefix.size() > longest)) {
      p.prefix_lock = &lock;
      longest = prefix.size();
    }
  }
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      queue_.push_back(std::move(p));
      if (queue_.size() == 1) cv_.notify_one();
      return;
    }
  }
  p.done(Status::Unavailable("the store is closed; writes are no longer accepted"));
}

void Writer::SetFence(std::string lock, FencingToken highest, std::string principal, bool unbind,
                      std::function<void(Result<Decision>)> done) {
  {
    std::lock_guard guard(mu_);
    if (!closing_) {
      admin_.push_back(
          AdminOp{std::move(lock), highest, std::move(principal), unbind, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(Status::Unavailable("the store is closed; the fence was not set"));
}

void Writer::Resume(Pending p) {
  std::lock_guard lock(mu_);
  --awaiting_;
  queue_.push_back(std::move(p));
  cv_.notify_one();
}

void Writer::Defer(Pending& p) {
  {
    std::lock_guard lock(mu_);
    ++awaiting_;
  }
  auto held = std::make_shared<Pending>(std::move(p));
  std::string lock = held->request.lock;
  FencingToken token = held->request.token;
  SharedVerdict known = verifier_->Join(lock, token, [this, held](SharedVerdict answer) {
    held->verdict = std::move(answer);
    held->resumed = true;
    Resume(std::move(*held));
  });
  if (known != nullptr) {  // answered meanwhile, or refused at once: back to the queue with it
    held->verdict = std::move(known);
    Resume(std::move(*held));
  }
}

StoreStats Writer::Stats() const {
  StoreStats s;
  s.accepted = accepted_.load(std::memory_order_relaxed);
  s.refused_stale = refused_stale_.load(std::memory_order_relaxed);
  s.refused_wrong_lock = refused_wrong_lock_.load(std::memory_order_relaxed);
  s.refused_wrong_service = refused_wrong_service_.load(std::memory_order_relaxed);
  s.refused_unverified = refused_unverified_.load(std::memory_order_relaxed);
  if (verifier_ != nullptr) {
    s.verifications = verifier_->calls();
    s.verify_failures = verifier_->failures();
  }
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
  // Writes waiting for a call that has not started fail at once rather than each waiting for
  // the lock service. The writer thread leaves once no write waits for the verifier, so no
  // continuation runs after this.
  if (verifier_ != nullptr) verifier_->BeginStop();
  if (writer_.joinable()) writer_.join();
  if (verifier_ != nullptr) verifier_->Stop();
  // Statements must be finalized before their connection closes.
  txn_ = sqlite::TxnStatements();
  for (Stmt* st : {&advance_fence_, &read_fence_, &insert_fence_, &read_object_, &upsert_object_,
                   &delete_object_, &insert_history_, &trim_history_, &set_fence_}) {
    *st = Stmt();
  }
  return true;
}

void Writer::CloseDatabase() { writer_db_ = sqlite::Db(); }

void Writer::WriterLoop() {
  std::vector<Pending> batch;
  batch.reserve(options_.max_batch);
  std::vector<AdminOp> admin;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock,
               [&] { return !queue_.empty() || !admin_.empty() || (closing_ && awaiting_ == 0); });
      if (queue_.empty() && admin_.empty()) break;
      for (auto& op : admin_) admin.push_back(std::move(op));
      admin_.clear();
      std::size_t n = std::min(queue_.size(), options_.max_batch);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (auto& op : admin) op.done(RunSetFence(op));
    admin.clear();
    if (batch.empty()) continue;
    CommitBatch(batch);
    for (auto& p : batch) {
      if (p.resumed) verifier_->Resumed(p.request.lock, p.request.token);
      if (p.outcome == Outcome::kDeferred) {
        Defer(p);
      } else {
        p.done(std::move(p.result));
      }
    }
    batch.clear();
  }
}

// Decides and applies every write of `batch` in one transaction. On any storage error the
// transaction is rolled back and every write of the batch fails: nothing is acknowledged.
void Writer::CommitBatch(std::vector<Pending>& batch) {
  Status failure = Status::Ok();
  auto txn = sqlite::Transaction::Begin(txn_);
  if (!txn.ok()) failure = txn.status();
  std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
          .count();
  std::int64_t last_seq = 0;
  for (auto& p : batch) {
    if (!failure.ok()) break;
    failure = Apply(p, now_ms, last_seq);
  }
  if (failure.ok() && last_seq > static_cast<std::int64_t>(options_.history_limit) &&
      last_seq % 64 < static_cast<std::int64_t>(batch.size())) {
    // Trimming every ~64 records keeps the history bounded without a delete per commit.
    trim_history_.BindInt(1, last_seq - static_cast<std::int64_t>(options_.history_limit));
    int rc = trim_history_.Step();
    if (rc != SQLITE_DONE) failure = sqlite::Error(writer_db_.get(), rc, "trimming the history");
    trim_history_.Reset();
  }
  if (failure.ok()) failure = txn->Commit();
  if (!failure.ok()) {
    if (txn.ok()) txn->Rollback();
    Status s = Status::IoError("the write was not stored: " + failure.message() +
                               ". Nothing in this batch was acknowledged; retry the write");
    if (failure.IsUnavailable()) s = Status::Unavailable(s.message());
    for (auto& p : batch) {
      p.result = s;
      p.outcome = Outcome::kFailed;
    }
    failed_.fetch_add(batch.size(), std::memory_order_relaxed);
    return;
  }
  commits_.fetch_add(1, std::memory_order_relaxed);
  std::size_t bucket = 0;
  while ((std::size_t{1} << bucket) < batch.size() && bucket + 1 < batch_buckets_.size()) {
    ++bucket;
  }
  batch_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  for (const auto& p : batch) {
    if (p.outcome == Outcome::kAccepted) {
      accepted_.fetch_add(1, std::memory_order_relaxed);
    } else if (p.outcome == Outcome::kRefused) {
      std::atomic<std::uint64_t>* counter[] = {nullptr, &refused_stale_, &refused_wrong_lock_,
                                               &refused_wrong_service_, &refused_unverified_};
      counter[static_cast<int>(p.refusal)]->fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace fencekit::fencedstore
