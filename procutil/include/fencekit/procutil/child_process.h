// A child process started with fork and exec, for programs that drive servers and clients as
// real processes (the demo, the pause kit, the tests).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::procutil {

struct ChildOptions {
  // The program and its arguments. A program without a '/' is looked up on PATH.
  std::vector<std::string> argv;
  // The file the child's stdout and stderr are appended to (created if missing). Empty: they
  // are this process's own.
  std::string output_path;
  // Pipes: Send() writes to the child's stdin and ReadLine() reads its stdout; stderr still
  // goes to `output_path`. Closing them (Kill(), destruction) gives the child end of file.
  bool pipe_stdio = false;
  // > 0: the child's RLIMIT_NOFILE, soft and hard, as `ulimit -n` would set it.
  int max_open_files = 0;
};

// One child process. Destruction kills it (SIGKILL, even when stopped) and reaps it.
// Thread safety: not safe for concurrent use.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess() { Kill(); }

  // Starts the program; kills and reaps the one this object ran before, if any. Fails
  // (kUnavailable) when fork fails or the program cannot be executed, with nothing left running.
  Status Start(ChildOptions options);

  // The process id while it runs (or is stopped), -1 once reaped or before Start().
  pid_t pid() const { return pid_; }
  const std::string& output_path() const { return options_.output_path; }

  // True once it has exited; reaps it then.
  bool Exited();
  // Sends `signal` unless it has been reaped (SIGSTOP/SIGCONT pause and resume it).
  void Signal(int signal);
  // Waits for it to exit and reaps it; the raw wait status (see waitpid), -1 if not running.
  int Wait();
  // Waits at most `timeout` for it to exit, then reaps it: the raw wait status, nullopt when it
  // still runs (or was not running: then -1).
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  // Sends `signal` and waits `grace` for it to exit; then SIGKILL. The raw wait status, and
  // whether it had to be killed; -1 if not running.
  struct Stopped {
    int status = -1;
    bool killed = false;
  };
  Stopped Stop(int signal, std::chrono::milliseconds grace);
  // SIGKILL, then reaps it. Does nothing if it is not running.
  void Kill();

  // With pipe_stdio: writes `line` and a newline to its stdin; false if it has closed it.
  bool Send(std::string_view line);
  // With pipe_stdio: one line of its stdout without the newline; nullopt at end of file.
  std::optional<std::string> ReadLine();

  // The last `max_bytes` of its output file ("" without one), to quote in error messages.
  std::string OutputTail(std::size_t max_bytes = 2000) const;

 private:
  void ClosePipes();

  ChildOptions options_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  std::FILE* from_child_ = nullptr;
};

// A descriptor that becomes readable when `pid`, a child of this process, exits (pidfd_open,
// Linux 5.3 and later): -1 when the kernel has none. The caller closes it.
int OpenExitFd(pid_t pid);

// Waits at most `timeout` for `pid`, a child of this process, to exit, and reaps it: its raw
// wait status (see waitpid), or nullopt when it still runs at `timeout` (it is then neither
// signalled nor reaped). -1 when it cannot be waited for (not a child of this process, or
// SIGCHLD ignored so that the kernel reaped it): never a status that reads as a clean exit.
// Sleeps in poll(2) on OpenExitFd; without one, looks every 5 ms.
std::optional<int> WaitForChild(pid_t pid, std::chrono::milliseconds timeout);

// Runs `argv` to its end within `timeout` (SIGKILLed past it), its output appended to
// `log_path`. kUnavailable, quoting that output, unless it exits 0; `what` names it in
// messages, `hint` (e.g. "install postgresql-15") follows a program that cannot be run.
Status RunToEnd(const std::vector<std::string>& argv, const std::string& log_path,
                std::chrono::milliseconds timeout, const std::string& hint,
                const std::string& what);

}  // namespace fencekit::procutil
