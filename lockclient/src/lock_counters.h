// The lock client's counters (LockClient::metrics), shared by LockClient and HeldLock.
// Thread safety: every field is atomic.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>

#include "fencekit/lockclient/lock_client.h"

namespace fencekit {

struct LockClient::Counters {
  std::atomic<std::uint64_t> attempts{0}, grants{0}, busy{0}, timeouts{0}, renewals{0},
      renewal_failures{0}, lost_refused{0}, lost_validity{0}, lost_marked{0}, wait_count{0},
      wait_ns{0}, checks{0}, check_failures{0};
  std::array<std::atomic<std::uint64_t>, std::size(LockMetrics::kWaitBounds) + 1> wait_buckets{};
};

}  // namespace fencekit
