// Health: the answers of GET /healthz (the database answers a read) and GET /readyz (the store
// accepts writes). A probe reads the database on a thread of its own, never on an I/O thread,
// and each check is answered within a timeout even when the database hangs. Checks that arrive
// while a probe of their kind is in flight wait for that probe and share its result, so a flood
// of probes costs one probe at a time and cannot crowd out a genuine one.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "net/work_queue.h"

namespace fencekit {
class FencedStore;
}  // namespace fencekit

namespace fencekit::httpapi {

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

  // Probes waiting or running at most; more are answered at once. Only a probe that timed out
  // while the database hangs leaves one behind, so this bounds the probes stuck behind it.
  static constexpr std::size_t kMaxQueuedProbes = 4;

 private:
  struct Round;
  // CheckLive, or with `ready` CheckReady's probe, on the probe thread within the timeout:
  // joins the round of that kind in flight, or starts one.
  void Examine(bool ready, Done done);
  // The probe itself; runs on the probe thread.
  Status Probe(bool ready);
  // Answers every check of `round` with `s` (once; later calls do nothing).
  void Finish(const std::shared_ptr<Round>& round, const Status& s);

  FencedStore* store_;
  WriteWatch* writes_;
  boost::asio::any_io_executor executor_;
  const std::chrono::milliseconds timeout_;
  std::atomic<bool> draining_{false};
  Mutex mu_;
  // The round in flight for live [0] and ready [1] checks, null when none.
  std::array<std::shared_ptr<Round>, 2> current_ FENCEKIT_GUARDED_BY(mu_);
  WorkQueue probes_{1, kMaxQueuedProbes};
};

}  // namespace fencekit::httpapi
