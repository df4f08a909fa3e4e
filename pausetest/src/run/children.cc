#include "run/children.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

namespace fencekit::pausetest {

bool StopRequested(int stop_fd) {
  pollfd p{stop_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

Status ReapClients(const std::vector<pid_t>& clients,
                   std::chrono::steady_clock::time_point deadline, bool whole_groups) {
  Status result = Status::Ok();
  for (pid_t pid : clients) {
    for (;;) {
      pid_t r = ::waitpid(pid, nullptr, WNOHANG);
      if (r == pid || r < 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(whole_groups ? -pid : pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        result = Status::Unavailable("a client did not stop in time and was killed");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (whole_groups) ::kill(-pid, SIGKILL);  // what its worker left running
  }
  return result;
}

}  // namespace fencekit::pausetest
