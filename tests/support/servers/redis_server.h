// A real redis-server child process on a free loopback port, without persistence unless asked
// for (procutil::RedisServer), that fails the test if it cannot start. Thread safety: not safe
// for concurrent use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/procutil/redis_server.h"

namespace fencekit::testing {

class RedisServer : public procutil::RedisServer {
 public:
  RedisServer();
  explicit RedisServer(procutil::RedisOptions options);
  // Options whose server keeps its data in `dir` (an append-only file, fsynced at every write),
  // so that it survives a SIGKILL and RestartKeepingData().
  static procutil::RedisOptions Persistent(const std::string& dir);

  // SIGKILLs the server and starts an empty one on the same port; fails the test if it cannot.
  void RestartEmpty();
  // SIGKILLs a Persistent() server and starts it again on the same port with its data; fails
  // the test if it cannot.
  void RestartKeepingData();
  // Runs one command (e.g. {"DEL", "key"}); returns the integer reply or -1.
  long long Command(const std::vector<std::string>& args);
  // Runs one command; returns a string or status reply's text (e.g. INFO's), else "".
  std::string Text(const std::vector<std::string>& args);
};

// A loopback port nobody listens on at the moment of the call.
std::uint16_t FreePort();

}  // namespace fencekit::testing
