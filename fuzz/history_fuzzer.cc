// Fuzz target "history": the pause kit's history files (one JSON object per line, written by
// several client processes), read by ReadHistory line by line, then checked by CheckHistory.
// A line is parsed or refused with kInvalidArgument, a parsed line prints (ToJsonLine) to a
// line that parses to the same operation, and the checker takes any history without crashing.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fencekit/pausetest/checker.h"
#include "fencekit/pausetest/history.h"
#include "support/fuzz_support.h"

namespace {

namespace pt = fencekit::pausetest;

bool Same(const pt::HistoryOp& a, const pt::HistoryOp& b) {
  return a.client == b.client && a.op == b.op && a.lock == b.lock && a.token == b.token &&
         a.key == b.key && a.value == b.value && a.start_us == b.start_us && a.end_us == b.end_us &&
         a.outcome == b.outcome && a.lease_expired == b.lease_expired && a.detail == b.detail;
}

// The file ReadHistory reads: a memory file, so that no run touches the disk.
const std::string& HistoryPath(int* fd) {
  static int memfd = ::memfd_create("fencekit-fuzz-history", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(memfd);
  FUZZ_CHECK(memfd >= 0, "memfd_create");
  *fd = memfd;
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  // Line by line, as ReadHistory splits them.
  std::size_t good_lines = 0;
  for (std::size_t at = 0; at <= input.size();) {
    std::size_t nl = input.find('\n', at);
    if (nl == std::string_view::npos) nl = input.size();
    std::string_view line = input.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    auto op = pt::FromJsonLine(line);
    if (!op.ok()) {
      FUZZ_CHECK(op.status().IsInvalidArgument(), op.status().ToString());
      continue;
    }
    ++good_lines;
    std::string printed = pt::ToJsonLine(*op);
    FUZZ_CHECK(printed.find('\n') == std::string::npos, printed);
    auto again = pt::FromJsonLine(printed);
    FUZZ_CHECK(again.ok(), printed);
    FUZZ_CHECK(Same(*op, *again), printed);
  }

  int fd = -1;
  const std::string& path = HistoryPath(&fd);
  FUZZ_CHECK(::ftruncate(fd, 0) == 0, "ftruncate");
  FUZZ_CHECK(::pwrite(fd, input.data(), input.size(), 0) == static_cast<ssize_t>(input.size()),
             "pwrite");
  auto history = pt::ReadHistory(path);
  if (!history.ok()) {
    FUZZ_CHECK(history.status().IsInvalidArgument(), history.status().ToString());
    return 0;
  }
  FUZZ_CHECK(history->size() == good_lines, input);

  // The checker, on the history and a store log made from it: every acknowledged write and
  // claim as accepted, reads' values as the final counters.
  pt::CheckInput check;
  check.history = *history;
  std::int64_t seq = 0;
  for (const auto& op : *history) {
    if ((op.op == "write" || op.op == "claim") && op.outcome == "ok") {
      fencekit::Decision d;
      d.seq = seq++ % 7;  // out of order and repeated, as a merged log may be
      d.op = "put";
      d.lock = op.lock;
      d.token = op.token;
      d.key = op.key;
      d.accepted = op.token % 3 != 0;
      d.highest = op.token;
      check.store_log.push_back(std::move(d));
    }
    if (op.op == "read") check.final_counters[op.key] = op.value;
  }
  pt::CheckReport report = pt::CheckHistory(check);
  FUZZ_CHECK(
      report.stale_accepted >= 0 && report.missing_acknowledged >= 0 && report.lost_updates >= 0,
      input);
  FUZZ_CHECK(report.ok() == report.violations.empty(), input);
  return 0;
}
