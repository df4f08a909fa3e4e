// ReleasedLeases: the leases a LockClient released most recently, so that a second Release of
// one can say so. Private to lockclient.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

#include "fencekit/lockclient/lock_client.h"

namespace fencekit::lockclient {

// A fixed ring of the last kCapacity releases, each kept as a 64-bit digest of (owner, token):
// recording one is a hash and two atomic operations, with no allocation, since every release
// pays for it. A digest collision could at worst call a lease "already released" when the
// service has refused it anyway. Thread safety: safe for concurrent use.
class ReleasedLeases {
 public:
  static constexpr std::size_t kCapacity = 1024;

  void Add(const Lease& lease) {
    std::size_t at = next_.fetch_add(1, std::memory_order_relaxed) % kCapacity;
    slots_[at].store(Digest(lease), std::memory_order_relaxed);
  }

  // True when `lease` is among the last kCapacity released.
  bool Contains(const Lease& lease) const {
    const std::uint64_t d = Digest(lease);
    for (const auto& slot : slots_) {
      if (slot.load(std::memory_order_relaxed) == d) return true;
    }
    return false;
  }

 private:
  // Never 0, the value of an empty slot.
  static std::uint64_t Digest(const Lease& lease) {
    std::uint64_t h = std::hash<std::string_view>()(lease.owner);
    h ^= static_cast<std::uint64_t>(lease.token.value()) * 0x9E3779B97F4A7C15ULL;
    return h | 1;
  }

  std::array<std::atomic<std::uint64_t>, kCapacity> slots_{};
  std::atomic<std::size_t> next_{0};
};

}  // namespace fencekit::lockclient
