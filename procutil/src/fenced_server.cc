#include "fencekit/procutil/fenced_server.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "exchange.h"

namespace fencekit::procutil {

Status FencedServer::Start(FencedOptions options) {
  options_ = std::move(options);
  if (options_.log_path.empty()) {
    return Status::InvalidArgument("FencedOptions::log_path is empty; give fenced a log file");
  }
  const std::string port_file = options_.log_path + ".port";
  // A file left by an earlier start would name that one's port.
  std::remove(port_file.c_str());
  // clang-format off
  std::vector<std::string> argv = {options_.binary,
      "--listen", "127.0.0.1:" + std::to_string(options_.port),
      "--db", options_.db,
      "--port-file", port_file};
  // clang-format on
  argv.insert(argv.end(), options_.args.begin(), options_.args.end());
  if (Status s = process_.Start({.argv = argv,
                                 .output_path = options_.log_path,
                                 .max_open_files = options_.max_open_files});
      !s.ok()) {
    return s;
  }
  // Polled every few milliseconds, within a bound: the file's appearance is the event.
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(port_file);
    unsigned port = 0;
    if (in >> port && port > 0 && port <= 65535) {
      port_ = static_cast<std::uint16_t>(port);
      return Status::Ok();
    }
    if (process_.Exited()) {
      return Status::Unavailable("fenced exited before listening; its output (" +
                                 options_.log_path + "):\n" + process_.OutputTail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  process_.Kill();
  return Status::Unavailable("fenced did not start listening within " +
                             std::to_string(options_.start_timeout.count()) + "ms; its output (" +
                             options_.log_path + "):\n" + process_.OutputTail());
}

Status FencedServer::Restart() {
  process_.Kill();
  FencedOptions again = options_;
  again.port = port_;
  return Start(std::move(again));
}

std::optional<std::int64_t> FencedServer::Metric(std::string_view name) const {
  std::string body = HttpCall(port_, "GET", "/metrics", "", std::chrono::seconds(5));
  std::string line_start = "\n" + std::string(name) + " ";
  auto at = body.find(line_start);
  if (at == std::string::npos) return std::nullopt;
  return std::strtoll(body.c_str() + at + line_start.size(), nullptr, 10);
}

void FencedServer::Stop() {
  process_.Stop(SIGTERM, options_.start_timeout);
}

}  // namespace fencekit::procutil
