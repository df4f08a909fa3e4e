// The decisions of one SQLite transaction as one row of the history_runs table: a run's
// decisions have consecutive seqs ending at the row's last_seq and the row's time. A row per
// transaction, not per decision: recording a decision is an append to a buffer, and the
// history costs one insert per commit. Private to fencedstore.
//
// The encoding: a format byte (1), then per decision: op, lock, token, key, accepted (one byte,
// 0 or 1), highest, reason, principal; each string as its length then its bytes, each number
// and length as an unsigned LEB128 varint.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/types.h"

namespace fencekit::fencedstore {

// Thread safety: not safe for concurrent use.
class HistoryRun {
 public:
  void Clear() {
    bytes_.clear();
    size_ = 0;
  }
  // The number of decisions added since the last Clear.
  std::size_t size() const { return size_; }
  // Appends a decision. REQUIRES: token >= 0 and highest >= 0.
  void Add(std::string_view op, std::string_view lock, std::int64_t token, std::string_view key,
           bool accepted, std::int64_t highest, std::string_view reason,
           std::string_view principal);
  // The encoded run (empty when no decision was added).
  std::string_view bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::size_t size_ = 0;
};

// Decodes the run stored as (`last_seq`, `time`, `bytes`), appending its decisions to `*out`
// oldest first. A run that does not decode (a damaged database) is an IoError naming its
// last_seq, and nothing of it is appended.
Status DecodeHistoryRun(std::string_view bytes, std::int64_t last_seq,
                        std::chrono::system_clock::time_point time, std::vector<Decision>* out);

}  // namespace fencekit::fencedstore
