#include "run/children.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "fencekit/procutil/child_process.h"

namespace fencekit::pausetest {

bool StopRequested(int stop_fd) {
  pollfd p{stop_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

Status ReapClients(const std::vector<pid_t>& clients,
                   std::chrono::steady_clock::time_point deadline, bool whole_groups) {
  Status result = Status::Ok();
  for (pid_t pid : clients) {
    const auto left = std::max(
        std::chrono::milliseconds(0),
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    if (!procutil::WaitForChild(pid, left)) {
      ::kill(whole_groups ? -pid : pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      result = Status::Unavailable("a client did not stop in time and was killed");
    }
    if (whole_groups) ::kill(-pid, SIGKILL);  // what its worker left running
  }
  return result;
}

}  // namespace fencekit::pausetest
