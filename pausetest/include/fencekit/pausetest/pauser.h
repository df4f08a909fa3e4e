// Pausing real processes (SIGSTOP / SIGCONT) on a seeded schedule.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

namespace fencekit::pausetest {

struct PlannedPause {
  std::chrono::milliseconds at{0};      // from the start of the run
  int target = 0;                       // index of the process to pause
  std::chrono::milliseconds length{0};  // how long it stays stopped
};

// `count` pauses spread at random over `run`, each of a random target in [0, targets) and a
// random length in [min_factor, max_factor] x ttl; sorted by `at`. The same seed gives the
// same schedule.
std::vector<PlannedPause> MakePauseSchedule(std::uint64_t seed, int targets, int count,
                                            std::chrono::milliseconds run,
                                            std::chrono::milliseconds ttl, double min_factor = 0.5,
                                            double max_factor = 3.0);

// Stops and continues processes, and continues every one it stopped when destroyed, so that a
// failing test does not leave stopped processes behind.
// Thread safety: not safe for concurrent use.
class ProcessPauser {
 public:
  ProcessPauser() = default;
  ProcessPauser(const ProcessPauser&) = delete;
  ProcessPauser& operator=(const ProcessPauser&) = delete;
  ~ProcessPauser() { ResumeAll(); }

  // False when the process does not exist (any more).
  bool Pause(pid_t pid);
  bool Resume(pid_t pid);
  void ResumeAll();
  bool paused(pid_t pid) const { return paused_.count(pid) != 0; }

 private:
  std::set<pid_t> paused_;
};

}  // namespace fencekit::pausetest
