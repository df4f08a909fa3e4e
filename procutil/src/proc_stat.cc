#include "fencekit/procutil/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

namespace fencekit::procutil {

namespace {

// A stat file of /proc: a process's, or one of its threads'. Read with read(2): a process that
// ends between the open and the read fails the read with ESRCH, on which libstdc++'s filebuf
// throws; here it reads as gone, as one that ended before the open.
ProcStat ReadStatFile(const std::string& path) {
  ProcStat out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  // The whole line: 52 fields of at most 20 digits, and a name of at most 64 bytes.
  char buf[4096];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return out;
  const std::string_view stat(buf, static_cast<std::size_t>(n));
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last
  // ')'.
  auto last_paren = stat.rfind(')');
  if (last_paren == std::string_view::npos) return out;
  std::istringstream rest{std::string(stat.substr(last_paren + 1))};
  char state = '?';
  pid_t parent = 0;
  if (rest >> state >> parent) out = {state, parent};
  return out;
}

}  // namespace

ProcStat ReadProcStat(pid_t pid) { return ReadStatFile("/proc/" + std::to_string(pid) + "/stat"); }

std::string ThreadStates(pid_t pid) {
  std::string states;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const char state = ReadStatFile(entry.path() / "stat").state;
    if (state != '?') states += state;  // '?': the thread ended meanwhile
  }
  return states;
}

bool WaitUntilStopped(pid_t pid, std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (true) {
    // 'T' stopped, 't' traced, 'Z' and 'X' exiting; none left: the process is gone.
    if (ThreadStates(pid).find_first_not_of("TtZX") == std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (ReadProcStat(pid).parent == parent) children.push_back(pid);
  }
  return children;
}

}  // namespace fencekit::procutil
