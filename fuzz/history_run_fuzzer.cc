// Fuzz target "history_run": the SQLite store's decoding of a history run
// (fencedstore/src/sqlite/history_run.h), the bytes of a `history_runs` row as a damaged database
// could hold them. Either the run decodes, to decisions with consecutive seqs ending at its
// last_seq that decode the same once encoded again, or it is an IoError that appends nothing.
//
// Input: the row's decisions blob.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sqlite/history_run.h"
#include "support/fuzz_support.h"

namespace {

using fencekit::Decision;
using fencekit::fencedstore::DecodeHistoryRun;
using fencekit::fencedstore::HistoryRun;

constexpr std::int64_t kLastSeq = std::int64_t{1} << 40;
const auto kTime = std::chrono::system_clock::time_point(std::chrono::milliseconds(1234));

bool Same(const Decision& a, const Decision& b) {
  return a.seq == b.seq && a.time == b.time && a.op == b.op && a.lock == b.lock &&
         a.token == b.token && a.key == b.key && a.accepted == b.accepted &&
         a.highest == b.highest && a.reason == b.reason && a.principal == b.principal;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<Decision> out;
  auto s = DecodeHistoryRun(bytes, kLastSeq, kTime, &out);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsIoError(), s.ToString());
    FUZZ_CHECK(out.empty(), bytes);
    return 0;
  }
  FUZZ_CHECK(!out.empty(), bytes);
  FUZZ_CHECK(out.back().seq == kLastSeq, bytes);
  HistoryRun again;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const Decision& d = out[i];
    FUZZ_CHECK(d.seq == kLastSeq - static_cast<std::int64_t>(out.size() - 1 - i), bytes);
    FUZZ_CHECK(d.time == kTime, bytes);
    FUZZ_CHECK(d.token >= 0 && d.highest >= 0, bytes);
    again.Add(d.op, d.lock, d.token, d.key, d.accepted, d.highest, d.reason, d.principal);
  }
  FUZZ_CHECK(again.size() == out.size(), bytes);
  // An encoding of the decoded decisions decodes to the same (the input may spell a number with
  // more varint bytes than needed, so the bytes themselves may differ).
  std::vector<Decision> back;
  FUZZ_CHECK(DecodeHistoryRun(again.bytes(), kLastSeq, kTime, &back).ok(), bytes);
  FUZZ_CHECK(back.size() == out.size(), bytes);
  for (std::size_t i = 0; i < out.size(); ++i) FUZZ_CHECK(Same(back[i], out[i]), bytes);
  // A run with more decisions than seqs up to its last is damaged too.
  std::vector<Decision> none;
  const auto short_seq = static_cast<std::int64_t>(out.size()) - 1;
  FUZZ_CHECK(DecodeHistoryRun(bytes, short_seq, kTime, &none).IsIoError(), bytes);
  FUZZ_CHECK(none.empty(), bytes);
  return 0;
}
