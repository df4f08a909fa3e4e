// Histories of register operations that users' workers record, one JSON object per line, for
// the linearizability checker (linearizability.h):
//
//   {"op":"read","key":"counter","value":"5","start_us":...,"end_us":...,"outcome":"ok"}
//   {"op":"write","key":"counter","value":6,"start_us":...,"end_us":...,"outcome":"unknown"}
//   {"op":"cas","key":"counter","from":5,"value":6,"start_us":...,"end_us":...,"outcome":"fail"}
//
// "value" (and a cas's "from") is required: a JSON string, an integer or null (the key is
// absent); values compare as text, so 5 and "5" are equal. Times are wall-clock microseconds since
// the epoch. "outcome" is "ok" (took effect once, between start and end), "fail" (took no effect)
// or "unknown" (a write or cas that may have taken effect at any moment after its start, or never).
// An optional integer "client" overrides the caller's; other fields are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// One operation on one key's register.
struct RegisterOp {
  enum class Kind { kRead, kWrite, kCas };
  enum class Outcome { kOk, kFail, kUnknown };

  int client = 0;
  Kind kind = Kind::kRead;
  std::string key;
  // read: the value read; write and cas: the value written. nullopt: absent.
  std::optional<std::string> value;
  std::optional<std::string> from;  // cas: the value it expected; nullopt: absent
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
  Outcome outcome = Outcome::kOk;
  int line = 0;  // the line in its history file, for messages; 0 when not from a file
};

// Parses one history line; `client` unless the line has its own "client". kInvalidArgument says
// which field is wrong, quoting at most 80 bytes of the input with control characters escaped.
// The result's line is 0.
Result<RegisterOp> ParseRegisterOp(std::string_view line_text, int client);

// Reads a history file; a missing file is an empty history. kInvalidArgument names the file's
// first malformed line. More than `max_ops` operations is kInvalidArgument too: a bound on what
// a worker can make the kit hold. Blank lines are skipped.
Result<std::vector<RegisterOp>> ReadRegisterHistory(const std::string& path, int client,
                                                    std::size_t max_ops = 1'000'000);

// One line for reports: "client 2 cas counter 5 -> 6 (ok) 12.345-12.601 s [history.jsonl line 7]".
// Times are seconds (with milliseconds) since `origin_us`; with the default 0, since the epoch.
// `file` names the file that op.line counts in ("[line 7]" when empty).
std::string Describe(const RegisterOp& op, std::int64_t origin_us = 0, std::string_view file = {});

}  // namespace fencekit::pausetest
