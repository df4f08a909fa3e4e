// A history of client operations, one JSON object per line, for the pause-test checker.
//
//   {"client":2,"op":"write","lock":"pt","token":17,"key":"counter","value":41,
//    "start_us":...,"end_us":...,"outcome":"ok","lease_expired":false}
//
// Times are wall-clock microseconds since the epoch, so that several processes on one machine
// can write one history.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// What one operation did.
struct HistoryOp {
  int client = 0;
  // "acquire", "claim" (a fenced write that advances the lock's fence before the read),
  // "read", "write" or "release".
  std::string op;
  std::string lock;
  std::int64_t token = 0;  // 0 when the operation had none (a failed acquire)
  std::string key;
  std::int64_t value = 0;  // read: the value read; write: the value written
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
  // "ok"; "stale" (the store refused the token: below its fence, or granted by another lock
  // service, e.g. a Redis that lost its data); "timeout" (acquire); "not_held" (release:
  // the lease had expired); "error" (no answer: the outcome is unknown).
  std::string outcome;
  // The lease's validity had run out when the operation ended (the client was paused or slow).
  bool lease_expired = false;
  std::string detail;  // the error message, when there is one
};

std::string ToJsonLine(const HistoryOp& op);  // without the newline
Result<HistoryOp> FromJsonLine(std::string_view line);

// Appends operations to a file. Each line goes out in one write(2) on an O_APPEND descriptor,
// so several processes may append to the same file without tearing lines.
// Thread safety: safe for concurrent use.
class HistoryWriter {
 public:
  static Result<HistoryWriter> Open(const std::string& path);
  HistoryWriter(HistoryWriter&& other) noexcept;
  HistoryWriter& operator=(HistoryWriter&& other) noexcept;
  ~HistoryWriter();
  Status Append(const HistoryOp& op);

 private:
  explicit HistoryWriter(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Reads a history file; kInvalidArgument names the first malformed line.
Result<std::vector<HistoryOp>> ReadHistory(const std::string& path);

// Wall-clock microseconds since the epoch.
std::int64_t NowMicros();

}  // namespace fencekit::pausetest
