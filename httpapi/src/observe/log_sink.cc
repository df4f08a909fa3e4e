#include "observe/log_sink.h"

#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <cerrno>
#include <ctime>

#include "fencekit/common/text.h"
#include "observe/metrics.h"

namespace fencekit::httpapi {
namespace {

// One write(2) per line where it fits, so lines of several processes sharing a file do not mix.
void WriteToStderr(std::string_view line) {
  std::string buf(line);
  buf += '\n';
  std::string_view rest = buf;
  while (!rest.empty()) {
    ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

LogSink::LogSink(std::function<void(std::string_view)> out, Metrics* metrics)
    : out_(out ? std::move(out) : WriteToStderr), metrics_(metrics) {}

void LogSink::Log(std::string line) {
  std::uint64_t dropped = dropped_.exchange(0, std::memory_order_relaxed);
  bool queued = queue_.TryPost([this, dropped, line = std::move(line)] {
    if (dropped != 0) {
      out_(LogTime(std::chrono::system_clock::now()) + " fenced: " + std::to_string(dropped) +
           " log line(s) dropped: the log could not keep up");
    }
    out_(line);
  });
  if (!queued) {
    dropped_.fetch_add(dropped + 1, std::memory_order_relaxed);
    if (metrics_ != nullptr) metrics_->CountLogLinesDropped(1);
  }
}

std::string Quote(std::string_view bytes) {
  return boost::json::serialize(boost::json::string(JsonSafeText(bytes)));
}

std::string LogTime(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace fencekit::httpapi
