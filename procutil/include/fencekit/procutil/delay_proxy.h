// A TCP proxy on loopback in front of a real server, for faults in the network between a client
// and the server: a request held in flight, a reply lost, an address that moves to another
// server (a failover). The server itself is untouched.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"

namespace fencekit::procutil {

// Listens on a free loopback port and forwards every connection it accepts to a server (on
// another loopback port, or at an IPv4 address), both ways, except as told:
//   HoldWhen(needle)     a connection whose client sends `needle` within one read (any read when
//                        `needle` is empty) is held from that read on: what its client sends
//                        waits in the proxy until Release(). Replies still flow.
//   CutReplyWhen(needle) the next connection whose client sends `needle` has its request
//                        forwarded, and is closed, both ways, when the server's reply comes,
//                        instead of passing it on: the request ran, its answer was lost.
//   HoldAll()            from then until Release(), no byte passes either way on any connection
//                        (those opened meanwhile too): what each side sends waits in the
//                        kernel's socket buffers, as in a network that delays it.
//   Retarget(port)       closes every open connection (before it returns); new ones go to
//                        `port`.
// What a held connection's client sent waits in the proxy, as a read from the client's socket
// at a time (reading stops while it is held, so the kernel's buffers bound it). One thread
// serves every connection. Thread safety: safe for concurrent use.
class DelayProxy {
 public:
  // kUnavailable when no loopback port can be opened.
  static Result<std::unique_ptr<DelayProxy>> Start(std::uint16_t target);
  // In front of `host` (an IPv4 address or a name resolved to one, once, here): kUnavailable,
  // saying why, when it does not resolve or no loopback port can be opened.
  static Result<std::unique_ptr<DelayProxy>> Start(const std::string& host, std::uint16_t port);
  ~DelayProxy();  // closes every connection, held or not
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  std::uint16_t port() const { return port_; }

  // Holds, from now until Release(), every connection that sends `needle`.
  void HoldWhen(std::string needle);
  // Holds every connection both ways, from now until Release() (returns once the serving
  // thread has stopped passing bytes on).
  void HoldAll();
  // Stops holding (HoldWhen and HoldAll), and returns once what was held has been passed to the
  // server (or the connection is gone). Connections stay open.
  void Release();
  // Waits until at least `n` connections are held; false when `timeout` passed first.
  bool WaitForHeld(int n, std::chrono::milliseconds timeout);
  // Waits until the server has answered (or closed) every connection a Release() let go, so
  // that what was held has run; false when `timeout` passed first.
  bool WaitForAnswers(std::chrono::milliseconds timeout);

  // Cuts the next connection that sends `needle`, as above.
  void CutReplyWhen(std::string needle);
  // Waits until at least `n` replies have been cut since Start; false when `timeout` passed.
  bool WaitForCuts(int n, std::chrono::milliseconds timeout);

  void Retarget(std::uint16_t target);

 private:
  struct Conn;
  DelayProxy(int listener, int wake, std::uint16_t port, std::uint32_t target_ip,
             std::uint16_t target);
  void Serve();
  void Wake();

  const int listener_;
  const int wake_;  // an eventfd: control changes wake the serving thread
  const std::uint16_t port_;
  const std::uint32_t target_ip_;  // network byte order
  std::thread thread_;

  Mutex mu_;
  CondVar cv_;
  // Control, set by callers and read by the serving thread.
  std::uint16_t target_ FENCEKIT_GUARDED_BY(mu_);
  std::uint64_t retargets_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::uint64_t retargets_applied_ FENCEKIT_GUARDED_BY(mu_) = 0;  // by the serving thread
  bool hold_armed_ FENCEKIT_GUARDED_BY(mu_) = false;
  bool hold_all_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::uint64_t hold_alls_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::uint64_t hold_alls_applied_ FENCEKIT_GUARDED_BY(mu_) = 0;  // by the serving thread
  std::string hold_needle_ FENCEKIT_GUARDED_BY(mu_);
  std::uint64_t releases_ FENCEKIT_GUARDED_BY(mu_) = 0;
  bool cut_armed_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::string cut_needle_ FENCEKIT_GUARDED_BY(mu_);
  bool stopping_ FENCEKIT_GUARDED_BY(mu_) = false;
  // Progress, set by the serving thread.
  int held_ FENCEKIT_GUARDED_BY(mu_) = 0;
  int released_ FENCEKIT_GUARDED_BY(mu_) = 0;  // connections let go by Release()
  // Of those, the ones the server has answered or closed since.
  int answered_ FENCEKIT_GUARDED_BY(mu_) = 0;
  int cuts_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::uint64_t releases_done_ FENCEKIT_GUARDED_BY(mu_) = 0;
};

}  // namespace fencekit::procutil
