// WriteWatch: what fenced does with each decision of the store on a write besides answering it:
// the event feed (events.h), one log line per write not accepted (log_sink.h), and the store's
// write state that GET /readyz reports.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "events.h"
#include "fencekit/common/status.h"
#include "fencekit/common/store_types.h"
#include "log_sink.h"

namespace fencekit {

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

  // Ok, or kUnavailable saying why the last write the store tried could not be committed
  // (cleared by the next commit).
  Status WriteState() const;

 private:
  EventHub* events_;
  LogSink* log_;
  std::atomic<bool> failing_{false};
  mutable std::mutex mu_;
  std::string failure_;  // GUARDED_BY(mu_)
};

}  // namespace fencekit
