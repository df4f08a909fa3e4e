// What Linux's /proc says of a process: its state and its parent, and the processes a parent
// started. For tests and their servers, which stop, kill and watch processes by pid.
#pragma once

#include <sys/types.h>

#include <vector>

namespace fencekit::procutil {

struct ProcStat {
  // The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z' zombie, ...); '?' when
  // the process is gone.
  char state = '?';
  pid_t parent = 0;
};

// /proc/<pid>/stat, read once.
ProcStat ReadProcStat(pid_t pid);

// The processes whose parent is `parent` now (one gone meanwhile is left out).
std::vector<pid_t> ChildrenOf(pid_t parent);

}  // namespace fencekit::procutil
