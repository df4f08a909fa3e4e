#include "fencekit/procutil/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <memory>
#include <thread>

#include "exchange.h"
#include "fencekit/procutil/loopback.h"

namespace fencekit::procutil {
namespace {

// True when the server on `port` answers INFO as process `pid`.
bool AnswersAs(std::uint16_t port, pid_t pid) {
  const std::string mark = "process_id:" + std::to_string(pid) + "\r\n";
  std::string reply = Exchange(
      port, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n",
      [&](const std::string& r) { return r.find(mark) != std::string::npos; },
      std::chrono::milliseconds(200));
  return reply.find(mark) != std::string::npos;
}

}  // namespace

Status RedisServer::Start(RedisOptions options) {
  options_ = std::move(options);
  return StartOnLoopbackPort(options_.port, &port_, [this](bool* taken) { return StartOn(taken); });
}

Status RedisServer::Restart() {
  process_.Kill();
  bool taken = false;
  return StartOn(&taken);
}

Status RedisServer::StartOn(bool* port_taken) {
  // clang-format off
  std::vector<std::string> argv = {
      options_.binary, "--port", std::to_string(port_), "--bind", "127.0.0.1",
      "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"};
  // clang-format on
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  Status started = process_.Start({.argv = std::move(argv), .output_path = options_.log_path});
  if (!started.ok()) return Status::Unavailable(started.message() + " (install redis-server)");
  const pid_t pid = process_.pid();
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (AnswersAs(port_, pid)) return Status::Ok();
    if (process_.Exited()) {
      // Without a log file there is nothing to tell why; a taken port is the usual cause.
      std::string output = process_.OutputTail();
      *port_taken = options_.log_path.empty() || output.find("in use") != std::string::npos;
      return Status::Unavailable("redis-server exited at start on port " + std::to_string(port_) +
                                 "; its output:\n" + output);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  process_.Kill();
  return Status::Unavailable("redis-server did not answer on port " + std::to_string(port_) +
                             " within " + std::to_string(options_.start_timeout.count()) +
                             "ms; its output:\n" + process_.OutputTail());
}

void RedisServer::Pause() { process_.Signal(SIGSTOP); }
void RedisServer::Resume() { process_.Signal(SIGCONT); }

Result<std::string> RedisServer::Command(const std::vector<std::string>& args,
                                         std::chrono::milliseconds timeout) const {
  const std::string where = "redis-server on port " + std::to_string(port_);
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(
      redisConnectWithTimeout("127.0.0.1", port_, tv), redisFree);
  if (c == nullptr || c->err) {
    return Status::Unavailable(where + ": cannot connect" +
                               (c ? std::string(": ") + c->errstr : ""));
  }
  redisSetTimeout(c.get(), tv);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  std::unique_ptr<redisReply, void (*)(void*)> r(
      static_cast<redisReply*>(
          redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())),
      freeReplyObject);
  if (r == nullptr) return Status::Unavailable(where + ": no reply: " + c->errstr);
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return std::string();
    case REDIS_REPLY_ERROR:
      return Status::Internal(where + " answered " + (args.empty() ? "" : args[0]) + " with " +
                              std::string(r->str, r->len));
    default:
      return Status::Internal(where + " answered " + (args.empty() ? "" : args[0]) +
                              " with a reply of type " + std::to_string(r->type));
  }
}

}  // namespace fencekit::procutil
