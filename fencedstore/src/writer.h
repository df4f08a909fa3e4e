// The store's single writer: a queue of writes, and one thread that hands them in batches to the
// engine (store_engine.h), each batch in one transaction with one durable commit (group commit). A
// write whose token would move a fence up under StoreOptions::verify leaves its batch
// unrecorded, waits for the lock service's answer (verifier.h) and comes back marked with it.
// Private to fencedstore.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store_engine.h"
#include "fencekit/common/clock.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"
#include "verifier.h"

namespace fencekit::fencedstore {

// Thread safety: Submit, SetFence, Stats and Stop are safe to call from any thread; Start and
// CloseDatabase must not run beside any other call.
class Writer {
 public:
  // REQUIRES: `options` (with max_batch >= 1) and `clock` outlive the writer.
  Writer(const StoreOptions& options, Clock* clock);

  // Starts the writer thread, which commits through `engine`.
  void Start(std::unique_ptr<Engine> engine);

  // As FencedStore::Submit: `done` runs on the writer thread. After Stop, fails with
  // kUnavailable at once.
  void Submit(WriteRequest request, FencedStore::WriteCallback done);
  // As FencedStore::SubmitBatch.
  void SubmitBatch(BatchRequest batch, FencedStore::BatchCallback done);
  // As FencedStore::SetFence, run on the writer thread in a transaction of its own.
  void SetFence(std::string lock, FencingToken highest, std::string principal, bool unbind,
                std::function<void(Result<Decision>)> done);
  // As FencedStore::CheckWritable: `done` runs on the writer thread (or at once when closed).
  void ProbeCommit(std::function<void(Status)> done);

  StoreStats Stats() const;

  // Refuses new writes, commits every queued one, joins the thread and closes the engine.
  // Returns false, doing nothing, when an earlier Stop did it all.
  bool Stop();

 private:
  // Checks the names and bounds of `p`'s writes, finds their lock_for locks and queues it.
  void Enqueue(Pending p);
  void WriterLoop();
  // Moves queued writes into `batch`, up to a transaction's worth; returns how many.
  std::size_t TakeWrites(std::vector<Pending>& batch) FENCEKIT_REQUIRES(mu_);
  // `next`: as Engine::CommitBatch's.
  void CommitBatch(std::vector<Pending>& batch, const Engine::TakeNext& next);
  // Hands a deferred write to the verifier; applies an answer it already has at once.
  void Defer(Pending& p);
  // Queues a write coming back from the verifier (also while closing).
  void Resume(Pending p);
  std::int64_t NowMs() const;

  const StoreOptions& options_;
  Clock* clock_;

  Mutex mu_;
  CondVar cv_;
  std::deque<Pending> queue_ FENCEKIT_GUARDED_BY(mu_);
  std::size_t queued_writes_ FENCEKIT_GUARDED_BY(mu_) = 0;  // the writes of queue_'s entries
  std::deque<AdminOp> admin_ FENCEKIT_GUARDED_BY(mu_);
  std::deque<std::function<void(Status)>> probes_
      FENCEKIT_GUARDED_BY(mu_);                        // ProbeCommit's callers
  std::size_t awaiting_ FENCEKIT_GUARDED_BY(mu_) = 0;  // writes held by the verifier
  bool closing_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::thread writer_;
  std::unique_ptr<Verifier> verifier_;  // when options_.verify

  // Used only by the writer thread (and by Start/Stop when it is not running).
  std::unique_ptr<Engine> engine_;

  // The linger before the next transaction: batch_linger, else shared_linger while the engine
  // sees another writer (looked at again once `shared_checked_` is kSharedLook old).
  std::chrono::microseconds Linger();
  // Whether the next batch waits for the loop's turn rather than going behind the last commit:
  // while the shared linger applies, or once its look is due.
  bool SharedTurnDue() const;
  static constexpr std::chrono::milliseconds kSharedLook{250};
  std::chrono::steady_clock::time_point shared_checked_{};
  std::atomic<bool> shared_{false};

  std::atomic<std::uint64_t> accepted_{0}, failed_{0}, commits_{0}, recoveries_{0}, retries_{0};
  // Refusals by their code (StoreStats::refused_by_code).
  std::array<std::atomic<std::uint64_t>, kStatusCodeCount> refused_{};
  std::vector<std::atomic<std::uint64_t>> batch_buckets_;
};

}  // namespace fencekit::fencedstore
