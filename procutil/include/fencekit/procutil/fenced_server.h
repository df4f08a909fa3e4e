// A `fenced` process on a loopback port, for the demo, the pause kit and the tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct FencedOptions {
  // The fenced binary.
  std::string binary;
  // Its database file (--db).
  std::string db;
  // Where its output is appended. fenced also writes its port to "<log_path>.port".
  std::string log_path;
  // 0: fenced picks a free port.
  std::uint16_t port = 0;
  // Added after --listen and --db, e.g. {"--no-fencing"}.
  std::vector<std::string> args;
  std::chrono::milliseconds start_timeout{20'000};
  // > 0: its file-descriptor limit (see ChildOptions::max_open_files).
  int max_open_files = 0;
};

// fenced on 127.0.0.1. Ready once fenced has written its port file (--port-file), which it
// does after it starts listening: no parsing of what it prints.
// Thread safety: not safe for concurrent use.
class FencedServer {
 public:
  // Starts it and waits until it listens. kUnavailable, quoting its output, when it exits
  // first or is not listening within start_timeout.
  Status Start(FencedOptions options);
  // SIGKILL, then starts it again on the same port and database.
  Status Restart();

  std::uint16_t port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The value of an unlabelled metric of its GET /metrics (e.g. fenced_event_streams_open);
  // nullopt when it cannot be read.
  std::optional<std::int64_t> Metric(std::string_view name) const;
  ChildProcess& process() { return process_; }
  const ChildProcess& process() const { return process_; }

  // SIGTERM (fenced finishes in-flight requests), then waits at most start_timeout for it to
  // exit before SIGKILL.
  void Stop();
  // SIGKILL, then reaps it.
  void Kill() { process_.Kill(); }

 private:
  FencedOptions options_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

}  // namespace fencekit::procutil
