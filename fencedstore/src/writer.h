// The store's single writer (writer.cc: the queue, the thread, the batches; writer_decide.cc:
// deciding and recording each write): a queue of writes, and one thread that decides and applies them in
// batches, each batch in one transaction with one fsync (group commit). A write whose token
// would move a fence up under StoreOptions::verify leaves its batch unrecorded, waits for the
// lock service's answer (verifier.h) and comes back marked with it. Private to fencedstore.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"
#include "verifier.h"

namespace fencekit::fencedstore {

// Thread safety: Submit, SetFence, Stats and Stop are safe to call from any thread; Start and
// CloseDatabase must not run beside any other call.
class Writer {
 public:
  // REQUIRES: `options` (with max_batch >= 1) and `clock` outlive the writer.
  Writer(const StoreOptions& options, Clock* clock);

  // Prepares the write statements on `db` and starts the writer thread. REQUIRES: `db` holds
  // the current schema; `txn` was prepared on it with TxnMode::kImmediate.
  Status Start(sqlite::Db db, sqlite::TxnStatements txn);

  // As FencedStore::Submit: `done` runs on the writer thread. After Stop, fails with
  // kUnavailable at once.
  void Submit(WriteRequest request, FencedStore::WriteCallback done);
  // As FencedStore::SetFence, run on the writer thread in a transaction of its own.
  void SetFence(std::string lock, FencingToken highest, std::string principal, bool unbind,
                std::function<void(Result<Decision>)> done);

  StoreStats Stats() const;

  // Refuses new writes, commits every queued one, joins the thread and finalizes the
  // statements. Returns false, doing nothing, when an earlier Stop did it all.
  bool Stop();
  // Closes the connection (the last use of it). REQUIRES: Stop() ran.
  void CloseDatabase();

 private:
  enum class Outcome { kAccepted, kRefused, kFailed, kDeferred };
  enum class Refusal { kNone, kStale, kWrongLock, kWrongService, kUnverified };
  struct Pending {
    WriteRequest request;
    FencedStore::WriteCallback done;
    // lock_for's lock for the key (the longest matching prefix), or null. Set by Submit.
    const std::string* prefix_lock = nullptr;
    // The lock service's answer on (lock, token), once asked; `resumed` when it came back from
    // a flight of the verifier (which is told once the write is processed).
    SharedVerdict verdict;
    bool resumed = false;
    // Set by CommitBatch.
    Result<WriteReceipt> result = Status::Internal("write not processed");
    Outcome outcome = Outcome::kFailed;
    std::int64_t highest = 0;
    Refusal refusal = Refusal::kNone;
  };
  struct AdminOp {
    std::string lock;
    FencingToken highest;
    std::string principal;
    bool unbind = false;
    std::function<void(Result<Decision>)> done;
  };

  void WriterLoop();
  void CommitBatch(std::vector<Pending>& batch);
  // Decides `p` and applies it inside the open transaction; a storage error is returned (the
  // batch then fails), a decision is left in `p`.
  Status Apply(Pending& p, std::int64_t now_ms, std::int64_t& last_seq);
  // Refuses `p` with `why`, recording it with the fence's highest token.
  Status Refuse(Pending& p, Refusal why, Status status, std::int64_t now_ms,
                std::int64_t& last_seq);
  // The fence of `lock`: false in `*exists` when it has none.
  Status ReadFence(const std::string& lock, bool* exists, std::int64_t* highest,
                   std::string* service);
  Status Record(const Pending& p, std::int64_t now_ms, std::int64_t& last_seq);
  // Hands a deferred write to the verifier; applies an answer it already has at once.
  void Defer(Pending& p);
  // Queues a write coming back from the verifier (also while closing).
  void Resume(Pending p);
  Result<Decision> RunSetFence(const AdminOp& op);

  const StoreOptions& options_;
  Clock* clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  std::deque<AdminOp> admin_;  // GUARDED_BY(mu_)
  std::size_t awaiting_ = 0;   // GUARDED_BY(mu_): writes held by the verifier
  bool closing_ = false;       // GUARDED_BY(mu_)
  std::thread writer_;
  std::unique_ptr<Verifier> verifier_;  // when options_.verify

  // Used only by the writer thread (and by Start/Stop when it is not running).
  sqlite::Db writer_db_;
  sqlite::TxnStatements txn_;
  sqlite::Stmt advance_fence_, read_fence_, insert_fence_, read_object_, upsert_object_,
      delete_object_, insert_history_, trim_history_, set_fence_;

  std::atomic<std::uint64_t> accepted_{0}, refused_stale_{0}, refused_wrong_lock_{0},
      refused_wrong_service_{0}, refused_unverified_{0}, failed_{0}, commits_{0};
  std::vector<std::atomic<std::uint64_t>> batch_buckets_;
};

}  // namespace fencekit::fencedstore
