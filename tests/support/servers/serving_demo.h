// fencekit-demo --serve as a child process, and the addresses it prints: its page, and fenced.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/procutil/child_process.h"
#include "support/test_support.h"

namespace fencekit::testing {

// The contents of the file at `path` ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// Failures are reported with ADD_FAILURE. Thread safety: not safe for concurrent use.
class ServingDemo {
 public:
  // Starts `binary` --serve --color never `args`, its output in `dir`/out, and waits up to 30 s
  // for the addresses it prints.
  ServingDemo(const std::string& binary, const TempDir& dir, std::vector<std::string> args);
  // Kills it if it still runs.
  ~ServingDemo() = default;

  // False when it did not start or say where to watch.
  bool started() const { return fenced_port_ != 0; }
  // "http://127.0.0.1:<port>/": the story's page.
  const std::string& page_url() const { return page_url_; }
  std::uint16_t fenced_port() const { return fenced_port_; }
  // What it printed so far.
  std::string Output() const { return ReadFile(output_); }
  // Waits up to 30 s until it has printed `text`; its output then.
  std::string WaitForOutput(const std::string& text);
  // Ctrl-C, then waits up to 10 s for it to exit; true when it exited with 0.
  bool Interrupt();
  procutil::ChildProcess& process() { return process_; }

 private:
  std::string output_;
  procutil::ChildProcess process_;
  std::string page_url_;
  std::uint16_t fenced_port_ = 0;
};

}  // namespace fencekit::testing
