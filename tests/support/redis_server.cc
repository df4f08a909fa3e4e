#include "redis_server.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>

#include "fencekit/procutil/loopback.h"

namespace fencekit::testing {

std::uint16_t FreePort() {
  auto port = procutil::FreeLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  return port.ok() ? *port : 0;
}

namespace {

// Runs one command on a new connection to 127.0.0.1:`port`; null when it failed.
std::unique_ptr<redisReply, void (*)(void*)> Run(std::uint16_t port,
                                                 const std::vector<std::string>& args) {
  std::unique_ptr<redisReply, void (*)(void*)> none(nullptr, freeReplyObject);
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr || c->err) {
    if (c != nullptr) redisFree(c);
    return none;
  }
  redisSetTimeout(c, tv);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  redisFree(c);
  return {r, freeReplyObject};
}

}  // namespace

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
  auto r = Run(port(), args);
  return (r != nullptr && r->type == REDIS_REPLY_INTEGER) ? r->integer : -1;
}

std::string RedisServer::Text(const std::vector<std::string>& args) {
  auto r = Run(port(), args);
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return "";
  return std::string(r->str, r->len);
}

}  // namespace fencekit::testing
