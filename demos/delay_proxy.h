// A network that delays a request in flight, for the slow-network scenario.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace fencekit::demo {

// Listens on a free loopback port and holds the first connection it accepts until Release(),
// then connects it to `target` and forwards bytes both ways. Thread safety: Release and port
// may be called from any thread.
class DelayProxy {
 public:
  explicit DelayProxy(std::uint16_t target);
  // Releases a held connection and waits for the forwarding to end.
  ~DelayProxy();

  std::uint16_t port() const { return port_; }
  void Release();

 private:
  void Serve();

  std::uint16_t target_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;  // GUARDED_BY(mu_)
};

}  // namespace fencekit::demo
