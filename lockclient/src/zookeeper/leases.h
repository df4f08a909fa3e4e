// The leases a ZooKeeper client process has: each owner's znode in a lock's line, and when an
// unrenewed lease ends. Private to lockclient.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "fencekit/common/clock.h"
#include "fencekit/common/mutex.h"
#include "zookeeper/session.h"

namespace fencekit::lockclient::zk {

// An owner's znode, while in line or holding.
struct HeldNode {
  std::string lock;
  std::string owner;
  std::shared_ptr<Session> session;
  std::string path;  // empty: a create of unknown outcome (Unsettled)
  Zxid czxid = 0;
};

// Each owner's znode, and when its lease ends unless renewed. A lease that is not renewed ends
// at its ttl, as on every other lock service, though its session (kept alive by the C client
// while the process runs) would hold the znode on: a thread of its own (the reaper) takes an
// ended lease's node out at that time, on `clock`, and hands it to `end`, which deletes it.
// Thread safety: safe for concurrent use; `end` runs on the reaper's thread with no lock held.
class Leases {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using EndFn = std::function<void(const HeldNode&)>;

  // Starts the reaper.
  Leases(Clock* clock, EndFn end);
  // Stops the reaper, after an `end` it is running returns.
  ~Leases();
  Leases(const Leases&) = delete;
  Leases& operator=(const Leases&) = delete;

  std::optional<HeldNode> Known(std::string_view owner) const;
  void Forget(std::string_view owner);
  // `node` is in line, not granted: kept with no end (an unsettled attempt's end is cleared).
  void InLine(HeldNode node);
  // `node`'s attempt ended with its znode made, or perhaps made (path empty): a retry takes it
  // up, else it ends at `until`.
  void Unsettled(HeldNode node, SteadyTime until);
  // `owner`'s lease ends at `until` unless renewed again.
  void Renewed(std::string_view owner, SteadyTime until);

 private:
  void Reap();
  // Wakes the reaper only when `until` comes before the time it sleeps until: a grant per
  // cycle would otherwise cost a thread wake-up per cycle.
  void WakeReaperFor(SteadyTime until) FENCEKIT_REQUIRES(mu_);

  Clock* const clock_;
  const EndFn end_;
  mutable Mutex mu_;
  // owner -> its znode, while in line or holding.
  std::map<std::string, HeldNode, std::less<>> held_ FENCEKIT_GUARDED_BY(mu_);
  // owner -> when its lease ends unless renewed (the reaper's list).
  std::map<std::string, SteadyTime, std::less<>> ends_ FENCEKIT_GUARDED_BY(mu_);
  CondVar reap_cv_;
  // When the sleeping reaper wakes by itself (max: not before a notify; min: it is awake and
  // will look at ends_ again before it sleeps).
  SteadyTime reaper_wakes_ FENCEKIT_GUARDED_BY(mu_) = SteadyTime::min();
  bool stopping_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::thread reaper_;  // last: started once the rest is made
};

}  // namespace fencekit::lockclient::zk
