// One client process of a worker pause run: acquires the lock, runs the user's worker under it
// with the lease renewed, releases; records what it did (the kit's events) for the check's
// report and the run's timeline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/pausetest/worker_runner.h"  // kWorkerClientCommand

namespace fencekit::pausetest {

// What one client process does, and where it records it.
struct WorkerClientPlan {
  int index = 0;
  int run = 0;
  std::string locks_uri, lock, worker, run_dir;
  std::string history_path;  // FENCEKIT_HISTORY for its workers
  std::string events_path;   // the kit's events (KitEvent lines)
  std::string log_path;      // its workers' stdout and stderr
  std::chrono::milliseconds ttl{0}, worker_timeout{0}, kill_grace{0};
  int stop_fd = -1;  // the read end of a pipe whose closing tells the client to stop
  // The write end of a pipe the client writes one byte to once it runs: the run's clock starts
  // when every client has (a fresh program takes a while to start, under sanitizers most).
  int ready_fd = -1;
  // Added to each worker's environment (FENCEKIT_PROXY_<NAME>).
  std::vector<std::pair<std::string, std::string>> env;
};

// The body of one client process (in a forked child that leads its own process group, which
// the kit stops and continues whole; returns the exit code). Loops until `plan.stop_fd` closes.
int WorkerClientMain(const WorkerClientPlan& plan);

// The plan as the argument after kWorkerClientCommand (JSON), and back (kInvalidArgument).
std::string EncodeWorkerClientPlan(const WorkerClientPlan& plan);
Result<WorkerClientPlan> DecodeWorkerClientPlan(std::string_view text);

// One line of a client's events file.
struct KitEvent {
  // "grant": the lock granted `token` at at_us. "worker": an invocation under `token` ran from
  // start_us to at_us and ended as `detail` ("exit 0", "killed by signal 9").
  // "expired": the lease of `token` was valid until at_us and then lost while held.
  // "release": released at at_us, `detail` "ok", "not held" or the error.
  // "error": the lock service failed at at_us (detail).
  std::string event;
  std::int64_t token = 0;
  std::int64_t start_us = 0;
  std::int64_t at_us = 0;
  std::string detail;
  bool failed = false;  // "worker": it did not exit 0 (and was not stopped at the run's end)
  int exit_code = -1;   // "worker": its exit code; -1 when a signal ended it
};

// Reads a client's events file (a missing one is empty); malformed lines are skipped.
std::vector<KitEvent> ReadKitEvents(const std::string& path);

}  // namespace fencekit::pausetest
