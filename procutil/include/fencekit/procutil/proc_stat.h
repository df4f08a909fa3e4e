// What Linux's /proc says of a process: its state and its parent, and the processes a parent
// started. For tests and their servers, which stop, kill and watch processes by pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
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

// The state letter of each thread of `pid` now (/proc/<pid>/task/*/stat); "" when it is gone.
std::string ThreadStates(pid_t pid);

// After a SIGSTOP, which the kernel delivers asynchronously: waits until every thread of `pid`
// is stopped (or the process is gone), looking every millisecond, at most `bound`. False when
// some thread still runs then: until this returns true, a stopped server may still answer.
bool WaitUntilStopped(pid_t pid, std::chrono::milliseconds bound = std::chrono::seconds(5));

// The processes whose parent is `parent` now (one gone meanwhile is left out).
std::vector<pid_t> ChildrenOf(pid_t parent);

}  // namespace fencekit::procutil
