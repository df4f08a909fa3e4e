#include "fencekit/procutil/proc_stat.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

namespace fencekit::procutil {

namespace {

// A stat file of /proc: a process's, or one of its threads'.
ProcStat ReadStatFile(const std::string& path) {
  std::ifstream in(path);
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last
  // ')'.
  ProcStat out;
  auto close = stat.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream rest(stat.substr(close + 1));
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
