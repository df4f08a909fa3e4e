#include "redis_server.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "fencekit/procutil/loopback.h"

namespace fencekit::testing {

std::uint16_t FreePort() {
  auto port = procutil::FreeLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  return port.ok() ? *port : 0;
}

RedisServer::RedisServer() {
  Status s = Start();
  EXPECT_TRUE(s.ok()) << s.message() << " (scripts/test installs redis-server)";
}

void RedisServer::RestartEmpty() {
  Status s = Restart();
  EXPECT_TRUE(s.ok()) << s.message();
}

long long RedisServer::Command(const std::vector<std::string>& args) {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port(), tv);
  if (c == nullptr || c->err) {
    if (c != nullptr) redisFree(c);
    return -1;
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  long long out = (r != nullptr && r->type == REDIS_REPLY_INTEGER) ? r->integer : -1;
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return out;
}

}  // namespace fencekit::testing
