#include "redis/connection.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "fencekit/common/mutex.h"
#include "redis/protocol.h"

namespace fencekit::lockclient {
namespace {

using std::chrono::milliseconds;

timeval ToTimeval(milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>((d.count() % 1000) * 1000)};
}

}  // namespace

RedisNode::RedisNode(Options options, std::span<const char* const> scripts)
    : options_(std::move(options)),
      scripts_(scripts),
      service_("redis://" + options_.endpoint.Name() + "/" + std::to_string(options_.db)),
      address_(options_.endpoint.Name()),
      shas_(scripts.size()) {}

Status RedisNode::Check() {
  auto conn = Take();
  if (!conn.ok()) return conn.status();
  Give(std::move(conn->c));
  return Status::Ok();
}

Result<RedisNode::Conn> RedisNode::Take() {
  for (;;) {
    Idle idle;
    {
      MutexLock guard(pool_mu_);
      if (idle_.empty()) break;
      idle = std::move(idle_.back());
      idle_.pop_back();
    }
    bool ok = true;
    for (int i = 0; i < idle.owed && ok; ++i) {
      void* r = nullptr;
      ok = redisGetReply(idle.c.get(), &r) == REDIS_OK;
      if (r != nullptr) freeReplyObject(r);
    }
    if (ok) return Conn{std::move(idle.c), true};
  }
  timeval tv = ToTimeval(options_.op_timeout);
  RedisContext c(
      redisConnectWithTimeout(options_.endpoint.host.c_str(), options_.endpoint.port, tv));
  if (c == nullptr || c->err) {
    return Status::Unavailable("cannot connect to " + service_ + ": " +
                               (c ? c->errstr : "out of memory") +
                               "; is redis-server running there?");
  }
  redisSetTimeout(c.get(), tv);
  redisEnableKeepAlive(c.get());
  redis_protocol::BoundReplyArrays(c->reader);
  if (!options_.password.empty()) {
    RedisReply r(static_cast<redisReply*>(
        redisCommand(c.get(), "AUTH %b", options_.password.data(), options_.password.size())));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      return Status::Unavailable("authentication to " + service_ + " failed");
    }
  }
  if (options_.db != 0) {
    RedisReply r(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", options_.db)));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      return Status::InvalidArgument("cannot select database " + std::to_string(options_.db) +
                                     " on " + service_);
    }
  }
  return Conn{std::move(c), false};
}

void RedisNode::Give(RedisContext c, int owed) {
  if (c->err) return;  // broken: drop it, the next Take reconnects
  MutexLock guard(pool_mu_);
  if (static_cast<int>(idle_.size()) < std::max(1, options_.pool_size)) {
    idle_.push_back(Idle{std::move(c), owed});
  }
}

void RedisNode::DropIdle() {
  MutexLock guard(pool_mu_);
  idle_.clear();
}

bool RedisNode::Append(redisContext* c, int script, const std::vector<std::string>& keys,
                       const std::vector<std::string>& args) {
  std::string sha;
  {
    MutexLock guard(pool_mu_);
    sha = shas_[script];
  }
  std::string nkeys = std::to_string(keys.size());
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  auto push = [&](std::string_view s) {
    argv.push_back(s.data());
    lens.push_back(s.size());
  };
  push(sha.empty() ? "EVAL" : "EVALSHA");
  push(sha.empty() ? std::string_view(scripts_[script]) : std::string_view(sha));
  push(nkeys);
  for (const auto& k : keys) push(k);
  for (const auto& a : args) push(a);
  redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
  return sha.empty();
}

bool RedisNode::IsNoScript(const redisReply* r, int script) {
  if (r->type != REDIS_REPLY_ERROR || !std::string_view(r->str, r->len).starts_with("NOSCRIPT")) {
    return false;
  }
  MutexLock guard(pool_mu_);
  shas_[script].clear();
  return true;
}

void RedisNode::LearnSha(redisContext* c, int script) {
  const char* argv[] = {"SCRIPT", "LOAD", scripts_[script]};
  std::size_t lens[] = {6, 4, std::strlen(scripts_[script])};
  RedisReply r(static_cast<redisReply*>(redisCommandArgv(c, 3, argv, lens)));
  if (r && r->type == REDIS_REPLY_STRING) {
    MutexLock guard(pool_mu_);
    shas_[script] = std::string(r->str, r->len);
  }
}

Status RedisNode::Refused(const redisReply* r, std::string_view lock) const {
  return Status::Unavailable(service_ + " refused the request for lock \"" + std::string(lock) +
                             "\": " + std::string(r->str, r->len));
}

Result<RedisReply> RedisNode::Eval(int script, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args, std::string_view lock,
                                   int* sends) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto conn = Take();
    if (!conn.ok()) return conn.status();
    redisContext* c = conn->c.get();
    bool eval = Append(c, script, keys, args);
    if (sends != nullptr) ++*sends;
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
      std::string err = c->errstr;
      if (conn->pooled && attempt == 0) {
        DropIdle();
        continue;
      }
      return Status::Unavailable("no reply from " + service_ + " for lock \"" + std::string(lock) +
                                 "\": " + err);
    }
    RedisReply r(static_cast<redisReply*>(raw));
    if (IsNoScript(r.get(), script)) {
      Give(std::move(conn->c));
      --attempt;
      if (sends != nullptr) --*sends;  // it did not run
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      Give(std::move(conn->c));
      return Refused(r.get(), lock);
    }
    if (eval) LearnSha(c, script);
    Give(std::move(conn->c));
    return r;
  }
  return Status::Unavailable("no reply from " + service_);
}

void RedisNode::BlockingPop(const std::string& key, milliseconds max_wait) {
  if (max_wait <= milliseconds(0)) return;
  auto conn = Take();
  if (!conn.ok()) return;
  RedisContext c = std::move(conn->c);
  redisSetTimeout(c.get(), ToTimeval(max_wait + options_.op_timeout));
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f",
                std::max(0.001, static_cast<double>(max_wait.count()) / 1000.0));
  const char* argv[] = {"BLPOP", key.c_str(), secs};
  std::size_t lens[] = {5, key.size(), std::strlen(secs)};
  RedisReply r(static_cast<redisReply*>(redisCommandArgv(c.get(), 3, argv, lens)));
  redisSetTimeout(c.get(), ToTimeval(options_.op_timeout));
  Give(std::move(c));
}

}  // namespace fencekit::lockclient
