#include "fencekit/procutil/proc_stat.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace fencekit::procutil {

ProcStat ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
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
