// A real redis-server child process on a free loopback port, without persistence.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fencekit::testing {

class RedisServer {
 public:
  // Starts redis-server on a free port; fails the test if it cannot.
  RedisServer();
  ~RedisServer();
  std::uint16_t port() const { return port_; }
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // SIGKILLs the server and starts an empty one on the same port.
  void RestartEmpty();
  void Stop();
  // SIGSTOP / SIGCONT: the node hangs, its socket still accepting, as a paused process would.
  void Pause();
  void Resume();
  // Runs one command (e.g. {"DEL", "key"}); returns the integer reply or -1.
  long long Command(const std::vector<std::string>& args);

 private:
  // Starts on port_; sets pid_ to -1 if it exits at once (the test fails only on the last try).
  void Start(bool last_attempt);
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// A loopback port nobody listens on at the moment of the call.
std::uint16_t FreePort();

}  // namespace fencekit::testing
