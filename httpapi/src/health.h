// Health: the answers of GET /healthz (the database answers a read) and GET /readyz (the store
// accepts writes). A probe reads the database on a thread of its own, never on an I/O thread,
// and each check is answered within a timeout even when the database hangs.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>

#include "fencekit/common/status.h"
#include "work_queue.h"

namespace fencekit {

class FencedStore;
class WriteWatch;

// Thread safety: safe for concurrent use. The store and the executor's context must outlive it.
class HealthChecker {
 public:
  using Done = std::function<void(Status)>;

  // `timer_executor` runs the timeouts; `writes` (may be null) knows the store's write state.
  HealthChecker(FencedStore* store, WriteWatch* writes, boost::asio::any_io_executor timer_executor,
                std::chrono::milliseconds timeout);

  // Ok when the database answered a read within the timeout; else kUnavailable saying what
  // happened. `done` runs once, on the probe's thread or the executor.
  void CheckLive(Done done);
  // As CheckLive, and the server is not shutting down, and the store can commit: the last write
  // it tried was committed (or none failed), or else a probe commit succeeds now (which
  // clears the failure). A write is not needed to become ready again: a balancer that took
  // fenced out of rotation sends none.
  void CheckReady(Done done);
  // The server is shutting down: not ready from now on.
  void Draining() { draining_.store(true); }

  // Probes waiting or running at most; more are answered at once.
  static constexpr std::size_t kMaxQueuedProbes = 4;

 private:
  // CheckLive, or with `ready` CheckReady's probe, on the probe thread within the timeout.
  void Examine(bool ready, Done done);
  // The probe itself; runs on the probe thread.
  Status Probe(bool ready);

  FencedStore* store_;
  WriteWatch* writes_;
  boost::asio::any_io_executor executor_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> draining_{false};
  WorkQueue probes_{1, kMaxQueuedProbes};
};

}  // namespace fencekit
