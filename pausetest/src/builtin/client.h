// One client process of a pause run: the loop the kit pauses and whose history it checks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fencekit::pausetest {

// What one client does, and where it records it.
struct ClientPlan {
  int index = 0;
  std::string locks_uri, lock, key, claim_key, store_url, history_path;
  std::chrono::milliseconds ttl{0}, max_delay{0};
  std::uint64_t seed = 0;
  int stop_fd = -1;  // the read end of a pipe whose closing tells the client to stop
};

// The body of one client process (called in a forked child; returns its exit code): acquire,
// claim, read, write counter + 1, release; until `plan.stop_fd` is closed. Every operation is
// recorded in plan.history_path as it ends.
int ClientMain(const ClientPlan& plan);

}  // namespace fencekit::pausetest
