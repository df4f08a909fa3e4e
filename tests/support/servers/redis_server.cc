#include "redis_server.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "fencekit/procutil/loopback.h"

namespace fencekit::testing {

std::uint16_t FreePort() {
  auto port = procutil::FreeLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  return port.ok() ? *port : 0;
}

RedisServer::RedisServer() : RedisServer(procutil::RedisOptions{}) {}

RedisServer::RedisServer(procutil::RedisOptions options) {
  Status s = Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.message() << " (scripts/test installs redis-server)";
}

procutil::RedisOptions RedisServer::Persistent(const std::string& dir) {
  return {.extra_args = {"--appendonly", "yes", "--appendfsync", "always", "--dir", dir}};
}

void RedisServer::RestartEmpty() {
  Status s = Restart();
  EXPECT_TRUE(s.ok()) << s.message();
}

// The same restart: the options decide whether the data survives it.
void RedisServer::RestartKeepingData() { RestartEmpty(); }

long long RedisServer::Command(const std::vector<std::string>& args) {
  auto r = procutil::RedisServer::Command(args);
  if (!r.ok() || r->empty()) return -1;
  char* end = nullptr;
  long long n = std::strtoll(r->c_str(), &end, 10);
  return *end == '\0' ? n : -1;
}

std::string RedisServer::Text(const std::vector<std::string>& args) {
  auto r = procutil::RedisServer::Command(args);
  return r.ok() ? *r : "";
}

}  // namespace fencekit::testing
