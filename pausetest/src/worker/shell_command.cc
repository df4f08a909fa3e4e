#include "worker/shell_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "fencekit/procutil/child_process.h"

extern char** environ;

namespace fencekit::pausetest {

ShellEnvironment::ShellEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(overrides.begin(), overrides.end(),
                                      [&](const auto& o) { return o.first == name; });
    if (!replaced) entries_.push_back(std::move(entry));
  }
  for (const auto& [name, value] : overrides) entries_.push_back(name + "=" + value);
  for (auto& e : entries_) pointers_.push_back(e.data());
  pointers_.push_back(nullptr);
}

void ExecShell(const char* command, char* const* envp, int out_fd) {
  int in = ::open("/dev/null", O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(out_fd, STDERR_FILENO);
  // The kit ignores SIGTERM and blocks nothing the user's command should see differently.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* const argv[] = {sh, dash_c, const_cast<char*>(command), nullptr};
  ::execve("/bin/sh", argv, envp);
  ::_exit(127);
}

std::string DescribeWaitStatus(int status) {
  if (status == -1) return "ended with no status to read (not reaped by the kit)";
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended (wait status " + std::to_string(status) + ")";
}

std::string ShellResult::Describe() const {
  return DescribeWaitStatus(wait_status) + (timed_out ? " after its timeout" : "");
}

namespace {

// The last `max_bytes` of `path` written after offset `from`.
std::string Tail(const std::string& path, std::streamoff from, std::streamoff max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max(from, size - max_bytes));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

Result<ShellResult> RunShell(const std::string& command, const ShellEnvironment& env,
                             std::chrono::milliseconds timeout, const std::string& output_path) {
  int out = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    return Status::Unavailable("cannot open " + output_path + ": " + std::strerror(errno));
  }
  const off_t size_before = std::max<off_t>(0, ::lseek(out, 0, SEEK_END));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out);
    return Status::Unavailable("fork failed: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ExecShell(command.c_str(), env.envp(), out);
  }
  ::setpgid(pid, pid);
  ::close(out);
  ShellResult result;
  // Real time (not Clock): a real process's limit.
  if (const std::optional<int> status = procutil::WaitForChild(pid, timeout)) {
    result.wait_status = *status;
  } else {
    ::kill(-pid, SIGKILL);
    result.timed_out = true;
    ::waitpid(pid, &result.wait_status, 0);
  }
  ::kill(-pid, SIGKILL);  // what it left running in its group
  result.output = Tail(output_path, size_before, 4096);
  return result;
}

}  // namespace fencekit::pausetest
