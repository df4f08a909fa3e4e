// The store's single writer: a queue of writes, and one thread that decides and applies them in
// batches, each batch in one transaction with one fsync (group commit). Private to fencedstore.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"

namespace fencekit::fencedstore {

// Thread safety: Submit, Stats and Stop are safe to call from any thread; Start and
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

  StoreStats Stats() const;

  // Refuses new writes, commits every queued one, joins the thread and finalizes the
  // statements. Returns false, doing nothing, when an earlier Stop did it all.
  bool Stop();
  // Closes the connection (the last use of it). REQUIRES: Stop() ran.
  void CloseDatabase();

 private:
  struct Pending {
    WriteRequest request;
    FencedStore::WriteCallback done;
    Result<WriteReceipt> result = Status::Internal("write not processed");
    bool accepted = false;
    std::int64_t highest = 0;
  };

  void WriterLoop();
  void CommitBatch(std::vector<Pending>& batch);

  const StoreOptions& options_;
  Clock* clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  bool closing_ = false;       // GUARDED_BY(mu_)
  std::thread writer_;

  // Used only by the writer thread (and by Start/Stop when it is not running).
  sqlite::Db writer_db_;
  sqlite::TxnStatements txn_;
  sqlite::Stmt advance_fence_, read_fence_, insert_fence_, read_version_, upsert_object_,
      delete_object_, insert_history_, trim_history_;

  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, failed_{0}, commits_{0};
  std::vector<std::atomic<std::uint64_t>> batch_buckets_;
};

}  // namespace fencekit::fencedstore
