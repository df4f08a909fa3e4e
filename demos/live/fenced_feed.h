// FencedFeed: fenced's decisions as they happen (its GET /v1/events, the feed its /ui page
// reads), for fencekit-demo --serve after the scenario: the visitor's own writes go to fenced,
// and the demo's page shows them on the store's lane.
//
// A reader of Server-Sent Events over a loopback socket, on a thread of its own. Bounded: the
// response header at most kMaxHeaderBytes and an event at most kMaxEventBytes (past either, the
// connection is dropped and made again); every wait has a timeout; a stream that ends is
// reconnected every kRetry (decisions meanwhile are missed: fenced keeps no backlog).
// Thread safety: construct and destroy on one thread; the callback runs on the feed's thread.
#pragma once

#include <atomic>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "fencekit/common/mutex.h"

namespace fencekit::demo {

class FencedFeed {
 public:
  static constexpr std::size_t kMaxHeaderBytes = 16 << 10;
  static constexpr std::size_t kMaxEventBytes = 64 << 10;
  static constexpr std::chrono::milliseconds kRetry{1'000};

  using OnDecision = std::function<void(const boost::json::object& decision)>;
  // Reads fenced's feed on 127.0.0.1:`port`, calling `on_decision` for each decision.
  FencedFeed(std::uint16_t port, OnDecision on_decision);
  ~FencedFeed();  // stops at once
  FencedFeed(const FencedFeed&) = delete;
  FencedFeed& operator=(const FencedFeed&) = delete;

  // Waits until fenced has answered the stream 200 (decisions from then on are seen); false
  // when `timeout` passed first.
  bool WaitConnected(std::chrono::milliseconds timeout);

 private:
  void Run();
  // One connection: until it ends, fails, breaks a bound, or the feed stops.
  void Stream();
  // Waits up to `timeout` for `fd` to be ready for `events`; false on a stop or a timeout.
  bool Wait(int fd, short events, std::chrono::milliseconds timeout);
  // Appends what arrives to `buffer` (bounded by `max`); false when the peer closed, a wait
  // ran out, the bound was passed or the feed stops.
  bool Receive(int fd, std::string& buffer, std::size_t max, std::chrono::milliseconds timeout);

  const std::uint16_t port_;
  OnDecision on_decision_;
  int wake_[2] = {-1, -1};  // a pipe: the destructor writes to stop the thread's waits
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  CondVar cv_;
  bool connected_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fencekit::demo
