// LogSink: where fenced's log lines go (each refusal; with --access-log, each request). A line
// is handed to one logging thread through a bounded queue, so that a slow or blocked standard
// error (a full pipe) never stalls the writer thread or an I/O thread: when the queue is full,
// lines are dropped, counted, and the count is logged once the log keeps up again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "net/work_queue.h"

namespace fencekit::httpapi {

class Metrics;

// Thread safety: Log may be called from any thread.
class LogSink {
 public:
  // `out` receives each line, without its newline, on the logging thread; null writes it to
  // standard error. `metrics` (may be null) counts dropped lines.
  LogSink(std::function<void(std::string_view)> out, Metrics* metrics);
  // Writes the lines still queued.
  ~LogSink() { queue_.Stop(); }

  // Queues one line; never blocks. `line` must hold no newline (callers encode what they
  // quote: see Quote).
  void Log(std::string line);

  // Lines queued at most.
  static constexpr std::size_t kMaxQueued = 4096;

 private:
  std::function<void(std::string_view)> out_;
  Metrics* metrics_;
  std::atomic<std::uint64_t> dropped_{0};
  WorkQueue queue_{1, kMaxQueued};  // one thread: lines stay in order
};

// `bytes` as a double-quoted JSON string, safe in a log line whatever it holds: text that is
// not UTF-8 is percent-encoded first (JsonSafeText), then quotes, backslashes and control
// characters are escaped, so a name cannot end the line or fake a field.
std::string Quote(std::string_view bytes);

// The time as RFC 3339 UTC with milliseconds, "2025-01-31T12:00:00.123Z": how log lines begin.
std::string LogTime(std::chrono::system_clock::time_point t);

}  // namespace fencekit::httpapi
