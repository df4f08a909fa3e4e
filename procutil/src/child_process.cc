#include "fencekit/procutil/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace fencekit::procutil {

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : options_(std::move(other.options_)),
      pid_(std::exchange(other.pid_, -1)),
      to_child_(std::exchange(other.to_child_, -1)),
      from_child_(std::exchange(other.from_child_, nullptr)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    options_ = std::move(other.options_);
    pid_ = std::exchange(other.pid_, -1);
    to_child_ = std::exchange(other.to_child_, -1);
    from_child_ = std::exchange(other.from_child_, nullptr);
  }
  return *this;
}

Status ChildProcess::Start(ChildOptions options) {
  Kill();
  options_ = std::move(options);
  const std::string name = options_.argv.empty() ? "" : options_.argv.front();
  if (name.empty()) return Status::InvalidArgument("no program given to start");
  // Everything the child needs is made before fork(): between fork and exec it may only make
  // async-signal-safe calls, since another thread may hold the allocator's lock.
  std::vector<char*> argv;
  for (auto& a : options_.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out = -1;
  if (!options_.output_path.empty()) {
    out = ::open(options_.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) {
      return Status::Unavailable("cannot open " + options_.output_path + " for the output of " +
                                 name + ": " + std::strerror(errno));
    }
  }
  // exec closes `report`; before that, a failed exec writes its errno there.
  int report[2], in[2] = {-1, -1}, from[2] = {-1, -1};
  // stdin is a socket so that Send() can write with MSG_NOSIGNAL: a child that has exited must
  // not kill this process with SIGPIPE.
  bool piped =
      !options_.pipe_stdio || (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == 0 &&
                               ::pipe2(from, O_CLOEXEC) == 0);
  if (::pipe2(report, O_CLOEXEC) != 0 || !piped) {
    for (int fd : {out, in[0], in[1], from[0], from[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return Status::Unavailable("cannot make pipes to start " + name + ": " + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    if (out >= 0) {
      ::dup2(out, 2);
      if (!options_.pipe_stdio) ::dup2(out, 1);
    }
    if (options_.pipe_stdio) {
      ::dup2(in[0], 0);
      ::dup2(from[1], 1);
    }
    if (options_.max_open_files > 0) {
      rlimit lim{static_cast<rlim_t>(options_.max_open_files),
                 static_cast<rlim_t>(options_.max_open_files)};
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    ::execvp(argv[0], argv.data());
    int error = errno;
    ssize_t ignored = ::write(report[1], &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  int fork_error = errno;
  for (int fd : {out, report[1], in[0], from[1]}) {
    if (fd >= 0) ::close(fd);
  }
  if (pid < 0) {
    for (int fd : {report[0], in[1], from[0]}) {
      if (fd >= 0) ::close(fd);
    }
    return Status::Unavailable("fork failed, cannot start " + name + ": " +
                               std::strerror(fork_error));
  }
  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &exec_error, sizeof exec_error);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof exec_error)) {
    ::waitpid(pid, nullptr, 0);
    for (int fd : {in[1], from[0]}) {
      if (fd >= 0) ::close(fd);
    }
    return Status::Unavailable("cannot run " + name + ": " + std::strerror(exec_error) +
                               (name.find('/') == std::string::npos ? " (looked up on PATH)" : ""));
  }
  pid_ = pid;
  if (options_.pipe_stdio) {
    to_child_ = in[1];
    from_child_ = ::fdopen(from[0], "r");
  }
  return Status::Ok();
}

bool ChildProcess::Exited() {
  if (pid_ <= 0) return true;
  if (::waitpid(pid_, nullptr, WNOHANG) != pid_) return false;
  pid_ = -1;
  return true;
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

int ChildProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

std::optional<int> ChildProcess::WaitFor(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const std::optional<int> status = WaitForChild(pid_, timeout);
  if (status) pid_ = -1;
  return status;
}

ChildProcess::Stopped ChildProcess::Stop(int signal, std::chrono::milliseconds grace) {
  Stopped stopped;
  if (pid_ <= 0) return stopped;
  Signal(signal);
  if (auto status = WaitFor(grace); status.has_value()) {
    stopped.status = *status;
    return stopped;
  }
  ::kill(pid_, SIGKILL);
  ClosePipes();
  stopped.status = Wait();
  stopped.killed = true;
  return stopped;
}

void ChildProcess::Kill() {
  ClosePipes();
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // ends a stopped process too
  Wait();
}

void ChildProcess::ClosePipes() {
  if (to_child_ >= 0) ::close(std::exchange(to_child_, -1));
  if (from_child_ != nullptr) std::fclose(std::exchange(from_child_, nullptr));
}

bool ChildProcess::Send(std::string_view line) {
  if (to_child_ < 0) return false;
  std::string text(line);
  text += '\n';
  for (std::string_view rest = text; !rest.empty();) {
    ssize_t n = ::send(to_child_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<std::string> ChildProcess::ReadLine() {
  if (from_child_ == nullptr) return std::nullopt;
  std::string line;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, from_child_) != nullptr) {
    line += buf;
    if (line.back() == '\n') {
      line.pop_back();
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return line;
    }
  }
  if (line.empty()) return std::nullopt;
  return line;
}

std::string ChildProcess::OutputTail(std::size_t max_bytes) const {
  if (options_.output_path.empty()) return "";
  std::ifstream in(options_.output_path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
}

// The system call: glibc 2.36's <sys/pidfd.h> lacks extern "C".
int OpenExitFd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

std::optional<int> WaitForChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = OpenExitFd(pid);
  std::optional<int> result;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) {
      result = r > 0 ? status : -1;
      break;
    }
    // Rounded up: poll's milliseconds never end the wait before the deadline.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (fd >= 0) {
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    } else {
      ::usleep(5000);
    }
  }
  if (fd >= 0) ::close(fd);
  return result;
}

Status RunToEnd(const std::vector<std::string>& argv, const std::string& log_path,
                std::chrono::milliseconds timeout, const std::string& hint,
                const std::string& what) {
  ChildProcess child;
  if (Status s = child.Start({.argv = argv, .output_path = log_path}); !s.ok()) {
    return Status::Unavailable("cannot run " + what + ": " + s.message() + " (" + hint + ")");
  }
  const std::optional<int> status = child.WaitFor(timeout);
  if (!status.has_value()) {
    const std::string output = child.OutputTail();
    child.Kill();
    return Status::Unavailable(what + " did not finish within " +
                               std::to_string(timeout.count()) + "ms; its output:\n" + output);
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return Status::Unavailable(what + " failed; its output:\n" + child.OutputTail());
  }
  return Status::Ok();
}

}  // namespace fencekit::procutil
