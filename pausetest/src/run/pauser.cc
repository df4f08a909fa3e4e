#include "fencekit/pausetest/pauser.h"

#include <signal.h>

#include <algorithm>
#include <random>

namespace fencekit::pausetest {

std::vector<PlannedPause> MakePauseSchedule(std::uint64_t seed, int targets, int count,
                                            std::chrono::milliseconds run,
                                            std::chrono::milliseconds ttl, double min_factor,
                                            double max_factor) {
  std::mt19937_64 rng(seed);
  std::vector<PlannedPause> out;
  if (targets <= 0 || run.count() <= 0) return out;
  std::uniform_int_distribution<long long> at(0, run.count() - 1);
  std::uniform_int_distribution<int> target(0, targets - 1);
  std::uniform_real_distribution<double> factor(min_factor, max_factor);
  for (int i = 0; i < count; ++i) {
    PlannedPause p;
    p.at = std::chrono::milliseconds(at(rng));
    p.target = target(rng);
    p.length = std::chrono::milliseconds(static_cast<long long>(factor(rng) * ttl.count()));
    out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PlannedPause& a, const PlannedPause& b) { return a.at < b.at; });
  return out;
}

bool ProcessPauser::Pause(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  paused_.insert(pid);
  return true;
}

bool ProcessPauser::Resume(pid_t pid) {
  paused_.erase(pid);
  return ::kill(pid, SIGCONT) == 0;
}

void ProcessPauser::ResumeAll() {
  for (pid_t pid : paused_) ::kill(pid, SIGCONT);
  paused_.clear();
}

}  // namespace fencekit::pausetest
