// The client processes of one run, as the runners start and stop them: the stop pipe they poll,
// and their reaping. Private to pausetest.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// True once the run's stop pipe is readable (the runner closed its write end): a client ends
// its loop then. Never blocks.
bool StopRequested(int stop_fd);

// Waits for each client to exit until `deadline` (real time: these are real processes), and
// SIGKILLs one still running then, with its whole process group when `whole_groups`, which also
// kills whatever a client left running in its group once it has exited. kUnavailable when a
// client had to be killed.
Status ReapClients(const std::vector<pid_t>& clients,
                   std::chrono::steady_clock::time_point deadline, bool whole_groups);

}  // namespace fencekit::pausetest
