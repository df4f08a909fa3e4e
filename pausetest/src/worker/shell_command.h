// Running the user's commands (`sh -c CMD`) from the pause-test kit: with the caller's
// environment plus the kit's variables, output to a file, and a bound on every wait.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// This process's environment with `overrides` ("NAME=value") set, for execve: built before a
// fork, since a child of a threaded process may not allocate.
class ShellEnvironment {
 public:
  explicit ShellEnvironment(const std::vector<std::pair<std::string, std::string>>& overrides);
  char* const* envp() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// In a forked child: stdout and stderr to `out_fd` (stdin from /dev/null), default signal
// dispositions, then `sh -c command`. Async-signal-safe; never returns (exits 127).
[[noreturn]] void ExecShell(const char* command, char* const* envp, int out_fd);

// "exit 0", "exit 3", "killed by signal 9" from a waitpid status; -1: its status is unknown.
std::string DescribeWaitStatus(int wait_status);

struct ShellResult {
  int wait_status = 0;
  bool timed_out = false;  // killed (its whole process group) after the timeout
  std::string output;      // at most the last 4 KiB of what it printed
  bool ok() const { return !timed_out && wait_status == 0; }
  std::string Describe() const;  // "exit 3", "killed by signal 9 after the 60000 ms timeout"
};

// Runs `sh -c command` in its own process group, its output appended to `output_path`, and
// waits at most `timeout` (then SIGKILLs the group). kUnavailable when it cannot start.
Result<ShellResult> RunShell(const std::string& command, const ShellEnvironment& env,
                             std::chrono::milliseconds timeout, const std::string& output_path);

}  // namespace fencekit::pausetest
