#include "scenario/redis_node.h"

#include <hiredis/hiredis.h>

#include <memory>
#include <vector>

namespace fencekit::demo {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

// One command, `argv`, on the node; its reply, or why there is none.
Result<std::unique_ptr<redisReply, ReplyFree>> Command(std::uint16_t port,
                                                       const std::vector<std::string>& argv) {
  const timeval timeout{2, 0};
  std::unique_ptr<redisContext, ContextFree> c(redisConnectWithTimeout("127.0.0.1", port, timeout));
  if (!c || c->err) {
    return Status::Unavailable("Redis node on port " + std::to_string(port) + ": " +
                               (c ? c->errstr : "out of memory"));
  }
  redisSetTimeout(c.get(), timeout);
  std::vector<const char*> args;
  std::vector<std::size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  std::unique_ptr<redisReply, ReplyFree> reply(static_cast<redisReply*>(
      redisCommandArgv(c.get(), static_cast<int>(args.size()), args.data(), lengths.data())));
  if (!reply)
    return Status::Unavailable("Redis node on port " + std::to_string(port) + ": " + c->errstr);
  if (reply->type == REDIS_REPLY_ERROR) {
    return Status::Unavailable("Redis node on port " + std::to_string(port) + ": " +
                               std::string(reply->str, reply->len));
  }
  return reply;
}

std::string LockKey(const std::string& lock) { return "fencekit:{" + lock + "}:lock"; }

}  // namespace

Result<std::string> NodeHolder(std::uint16_t port, const std::string& lock) {
  auto r = Command(port, {"GET", LockKey(lock)});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_STRING) return std::string();
  std::string value((*r)->str, (*r)->len);
  return value.substr(0, value.find(':'));
}

Status DeleteLockKey(std::uint16_t port, const std::string& lock) {
  auto r = Command(port, {"DEL", LockKey(lock)});
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fencekit::demo
