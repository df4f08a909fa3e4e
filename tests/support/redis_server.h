// A real redis-server child process on a free loopback port, without persistence
// (procutil::RedisServer), that fails the test if it cannot start. Thread safety: not safe for
// concurrent use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/procutil/redis_server.h"

namespace fencekit::testing {

class RedisServer : public procutil::RedisServer {
 public:
  RedisServer();
  // SIGKILLs the server and starts an empty one on the same port; fails the test if it cannot.
  void RestartEmpty();
  // Runs one command (e.g. {"DEL", "key"}); returns the integer reply or -1.
  long long Command(const std::vector<std::string>& args);
};

// A loopback port nobody listens on at the moment of the call.
std::uint16_t FreePort();

}  // namespace fencekit::testing
