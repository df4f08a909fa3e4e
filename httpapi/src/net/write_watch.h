// WriteWatch: what fenced does with each decision of the store on a write besides answering it:
// the event feed (events.h), one log line per write not accepted (log_sink.h), and the store's
// write state that GET /readyz reports.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "observe/events.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "fencekit/fencedstore/types.h"
#include "observe/log_sink.h"

namespace fencekit::httpapi {

// The write a decision is about, as the handler received it.
struct WriteFacts {
  bool is_put = true;
  std::string lock;
  std::string key;
  std::int64_t token = 0;
  std::string principal;  // empty without --auth
};

// Thread safety: safe for concurrent use; Decided runs on the store's writer thread.
class WriteWatch {
 public:
  // Both must outlive the watch; `events` may be null (no feed).
  WriteWatch(EventHub* events, LogSink* log) : events_(events), log_(log) {}

  // Every write's result, accepted, refused or failed.
  void Decided(const WriteFacts& w, const Result<WriteReceipt>& r);

  // A batch's result (POST /v1/batch): an accepted batch is one event per write; a batch not
  // accepted is one event and one log line, about its first write (the line adds the size),
  // as the history records it once.
  void BatchDecided(const std::vector<WriteFacts>& writes,
                    const Result<std::vector<WriteReceipt>>& r);

  // Ok, or kUnavailable saying why the last write the store tried could not be committed
  // (cleared by the next commit, or by ClearFailure).
  Status WriteState() const;
  // How many writes have failed to commit so far.
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // A probe commit succeeded (FencedStore::CheckWritable): clears the write state, unless
  // another write failed since `failures()` was `seen`.
  void ClearFailure(std::uint64_t seen);

 private:
  // Publishes the event (if anyone listens) and updates the write state; returns whether the
  // store decided the write (accepted or refused it) rather than failed to.
  bool Record(const WriteFacts& w, const Status* refusal);
  void LogRefusal(const WriteFacts& w, const Status& s, bool decided, std::size_t batch_size);

  EventHub* events_;
  LogSink* log_;
  std::atomic<bool> failing_{false};
  std::atomic<std::uint64_t> failures_{0};  // written under mu_
  mutable Mutex mu_;
  std::string failure_ FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit::httpapi
