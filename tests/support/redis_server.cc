#include "redis_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace fencekit::testing {

std::uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

RedisServer::RedisServer() {
  // A test running in parallel may take the port between FreePort() and redis-server's bind.
  for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
    port_ = FreePort();
    Start(/*last_attempt=*/attempt == 4);
  }
}

RedisServer::~RedisServer() { Stop(); }

void RedisServer::Start(bool last_attempt) {
  std::string port = std::to_string(port_);
  pid_ = fork();
  if (pid_ == 0) {
    execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save",
           "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  // Ready when it answers PING: an event, polled with a bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    timeval tv{0, 200'000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c != nullptr && c->err == 0) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      bool ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r != nullptr) freeReplyObject(r);
      redisFree(c);
      if (ok) return;
    } else if (c != nullptr) {
      redisFree(c);
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (!last_attempt) return;  // most likely the port was taken: the caller retries
      FAIL() << "redis-server exited at start (is it installed? scripts/test installs it)";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL() << "redis-server did not answer PING on port " << port_;
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void RedisServer::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void RedisServer::RestartEmpty() {
  Stop();
  Start(/*last_attempt=*/true);
}

long long RedisServer::Command(const std::vector<std::string>& args) {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
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
