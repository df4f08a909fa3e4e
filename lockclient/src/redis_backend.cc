// The Redis lock service: one node, hiredis, Lua scripts run with EVALSHA.
//
// Keys per lock share the hash tag {name}: fencekit:{name}:lock holds "owner:token" with a PX
// expiry; fencekit:{name}:token is the never-expiring counter; fencekit:{name}:signal is the
// list a release pushes to, so a waiter blocked in BLPOP wakes at once; fencekit:{name}:waiting
// says someone waits, so an uncontended release skips the signal.
#include <hiredis/hiredis.h>

#include <boost/url/parse.hpp>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <functional>
#include <random>
#include <thread>
#include <map>
#include <mutex>
#include <vector>

#include "backend.h"

namespace fencekit {
namespace {

using std::chrono::milliseconds;

// Grants when free; a retry by the same owner gets its token back. Never lets the counter
// produce a token at or below ARGV[3], the highest this client has seen for the lock: if the
// counter was lost (Redis restarted empty, key evicted or deleted) tokens still go up for this
// client, and the reply says the counter was behind. When busy, it marks the lock as waited on
// (KEYS[3], expiring with the holder's lease plus a margin), atomically with the check, so a
// release that follows is sure to signal.
// Reply: {1, token, floored} or {0, holder_pttl}.
constexpr const char* kAcquireScript = R"lua(
local v = redis.call('get', KEYS[1])
if v then
  local sep = string.find(v, ':', 1, true)
  if sep and string.sub(v, 1, sep - 1) == ARGV[1] then
    return {1, tonumber(string.sub(v, sep + 1)), 0}
  end
  local pttl = redis.call('pttl', KEYS[1])
  redis.call('set', KEYS[3], 1, 'PX', math.max(pttl, 0) + 1000)
  return {0, pttl}
end
local t = redis.call('incr', KEYS[2])
local floor = tonumber(ARGV[3])
local floored = 0
if t <= floor then
  t = floor + 1
  floored = 1
  redis.call('set', KEYS[2], t)
end
redis.call('set', KEYS[1], ARGV[1] .. ':' .. t, 'PX', ARGV[2])
return {1, t, floored}
)lua";

// Reply: 1 released, -1 no such key (expired), -2 held by another owner (then also its value).
// Signals (one element on KEYS[2]) only when someone waits (KEYS[3]).
constexpr const char* kReleaseScript = R"lua(
local v = redis.call('get', KEYS[1])
if not v then return {-1} end
if string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. ':' then return {-2, v} end
redis.call('del', KEYS[1])
if redis.call('exists', KEYS[3]) == 1 then
  redis.call('del', KEYS[2])
  redis.call('lpush', KEYS[2], 1)
  redis.call('pexpire', KEYS[2], ARGV[2])
end
return {1}
)lua";

// Reply: 1 extended, -1 expired, -2 held by another owner (then also its value).
constexpr const char* kExtendScript = R"lua(
local v = redis.call('get', KEYS[1])
if not v then return {-1} end
if string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. ':' then return {-2, v} end
redis.call('pexpire', KEYS[1], ARGV[2])
return {1}
)lua";

// Raises the counter to at least ARGV[1] (Redlock's write-back round). Reply: the counter.
constexpr const char* kRaiseScript = R"lua(
local c = tonumber(redis.call('get', KEYS[1]) or '0')
local t = tonumber(ARGV[1])
if c < t then redis.call('set', KEYS[1], t) return t end
return c
)lua";

// Reply: {value or false, pttl, counter or false}.
constexpr const char* kInspectScript = R"lua(
return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2])}
)lua";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

timeval ToTimeval(milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>((d.count() % 1000) * 1000)};
}

std::string Key(std::string_view lock, std::string_view kind) {
  std::string k = "fencekit:{";
  k += lock;
  k += "}:";
  k += kind;
  return k;
}

std::int64_t TokenOf(std::string_view value) {
  auto sep = value.find(':');
  std::int64_t t = 0;
  if (sep != std::string_view::npos) {
    std::from_chars(value.data() + sep + 1, value.data() + value.size(), t);
  }
  return t;
}

class RedisBackend final : public LockBackend {
 public:
  RedisBackend(std::string host, int port, int db, std::string password,
               const LockOptions& options)
      : host_(std::move(host)),
        port_(port),
        db_(db),
        password_(std::move(password)),
        options_(options),
        service_("redis://" + host_ + ":" + std::to_string(port_) + "/" + std::to_string(db_)) {}

  Result<FencingToken> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                                  milliseconds* holder_remaining) override {
    std::int64_t floor = 0;
    {
      std::lock_guard guard(seen_mu_);
      if (auto it = seen_.find(std::string(lock)); it != seen_.end()) floor = it->second;
    }
    return TryAcquireAbove(lock, owner, ttl, floor, holder_remaining);
  }

  // One node's grant, with a token above `floor`.
  Result<FencingToken> TryAcquireAbove(std::string_view lock, std::string_view owner,
                                       milliseconds ttl, std::int64_t floor,
                                       milliseconds* holder_remaining) {
    std::string ttl_ms = std::to_string(ttl.count()), floor_s = std::to_string(floor);
    auto reply = Eval(kAcquire, {Key(lock, "lock"), Key(lock, "token"), Key(lock, "waiting")},
                      {owner, ttl_ms, floor_s}, lock);
    if (!reply.ok()) return reply.status();
    redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return BadReply(lock);
    if (r->element[0]->integer == 0) {
      *holder_remaining = milliseconds(std::max<long long>(0, r->element[1]->integer));
      return Status::Busy(Subject(lock, service_) + " is held");
    }
    std::int64_t token = r->element[1]->integer;
    if (r->elements > 2 && r->element[2]->integer == 1) counter_behind_.fetch_add(1);
    {
      std::lock_guard guard(seen_mu_);
      auto& seen = seen_[std::string(lock)];
      seen = std::max(seen, token);
    }
    return FencingToken::FromInt(token);
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    return OwnerChecked(kExtend, lock, owner, token, ttl, "extend");
  }

  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    return OwnerChecked(kRelease, lock, owner, token, options_.ttl, "release");
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    auto reply = Eval(kInspect, {Key(lock, "lock"), Key(lock, "token")}, {}, lock);
    if (!reply.ok()) return reply.status();
    redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return BadReply(lock);
    LockInfo info;
    info.lock = std::string(lock);
    if (r->element[0]->type == REDIS_REPLY_STRING) {
      std::string_view v(r->element[0]->str, r->element[0]->len);
      info.held = true;
      info.owner = std::string(v.substr(0, v.find(':')));
      if (auto t = FencingToken::FromInt(TokenOf(v)); t.ok()) info.token = *t;
      info.remaining = milliseconds(std::max<long long>(0, r->element[1]->integer));
    }
    if (r->element[2]->type == REDIS_REPLY_STRING) {
      std::int64_t last = std::atoll(std::string(r->element[2]->str, r->element[2]->len).c_str());
      if (auto t = FencingToken::FromInt(last); t.ok()) info.last_token = *t;
    }
    return info;
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    if (max_wait <= milliseconds(0)) return;
    auto ctx = Take();
    if (!ctx.ok()) return;
    Context c = std::move(ctx).value();
    // The socket timeout must outlast the blocking wait.
    redisSetTimeout(c.get(), ToTimeval(max_wait + options_.op_timeout));
    std::string key = Key(lock, "signal");
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3f",
                  std::max(0.001, static_cast<double>(max_wait.count()) / 1000.0));
    const char* argv[] = {"BLPOP", key.c_str(), secs};
    std::size_t lens[] = {5, key.size(), std::strlen(secs)};
    Reply r(static_cast<redisReply*>(redisCommandArgv(c.get(), 3, argv, lens)));
    redisSetTimeout(c.get(), ToTimeval(options_.op_timeout));
    Give(std::move(c));
  }

  const std::string& service() const override { return service_; }
  std::uint64_t counter_resets_detected() const override { return counter_behind_.load(); }

  // Raises the lock's counter to at least `token`.
  Status RaiseCounter(std::string_view lock, FencingToken token) {
    auto reply = Eval(kRaise, {Key(lock, "token")}, {token.ToString()}, lock);
    return reply.ok() ? Status::Ok() : reply.status();
  }
  // host:port, for per-node messages.
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  enum ScriptId { kAcquire, kRelease, kExtend, kInspect, kRaise, kScriptCount };
  static constexpr const char* kScripts[kScriptCount] = {
      kAcquireScript, kReleaseScript, kExtendScript, kInspectScript, kRaiseScript};

  Status OwnerChecked(ScriptId id, std::string_view lock, std::string_view owner,
                      FencingToken token, milliseconds ttl, std::string_view what) {
    // Owner ids are unique per grant, so the owner alone identifies the lease (Redlock's nodes
    // hold the same owner with different per-node tokens).
    std::string value(owner);
    std::string ttl_ms = std::to_string(ttl.count());
    std::vector<std::string> keys = {Key(lock, "lock")};
    if (id == kRelease) {
      keys.push_back(Key(lock, "signal"));
      keys.push_back(Key(lock, "waiting"));
    }
    auto reply = Eval(id, keys, {value, ttl_ms}, lock);
    if (!reply.ok()) return reply.status();
    redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) return BadReply(lock);
    switch (r->element[0]->integer) {
      case 1:
        return Status::Ok();
      case -1:
        return Status::NotHeld("cannot " + std::string(what) + " " + Subject(lock, service_) +
                               ": the lease expired (the key is gone); acquire again");
      default: {
        std::string other = r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
                                ? std::string(r->element[1]->str, r->element[1]->len)
                                : std::string();
        return Status::NotHeld("cannot " + std::string(what) + " " + Subject(lock, service_) +
                               ": it is held by another owner (token " +
                               std::to_string(TokenOf(other)) + "); this lease is lost");
      }
    }
  }

  Status BadReply(std::string_view lock) {
    return Status::Unavailable("unexpected reply from " + service_ + " for lock \"" +
                               std::string(lock) + "\"");
  }

  Result<Context> Take() {
    {
      std::lock_guard guard(pool_mu_);
      if (!idle_.empty()) {
        Context c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    timeval tv = ToTimeval(options_.op_timeout);
    Context c(redisConnectWithTimeout(host_.c_str(), port_, tv));
    if (c == nullptr || c->err) {
      return Status::Unavailable("cannot connect to " + service_ + ": " +
                                 (c ? c->errstr : "out of memory") +
                                 "; is redis-server running there?");
    }
    redisSetTimeout(c.get(), tv);
    redisEnableKeepAlive(c.get());
    if (!password_.empty()) {
      Reply r(static_cast<redisReply*>(redisCommand(c.get(), "AUTH %b", password_.data(),
                                                    password_.size())));
      if (!r || r->type == REDIS_REPLY_ERROR) {
        return Status::Unavailable("authentication to " + service_ + " failed");
      }
    }
    if (db_ != 0) {
      Reply r(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", db_)));
      if (!r || r->type == REDIS_REPLY_ERROR) {
        return Status::InvalidArgument("cannot select database " + std::to_string(db_) +
                                       " on " + service_);
      }
    }
    return c;
  }

  void Give(Context c) {
    if (c->err) return;  // broken: drop it, the next Take reconnects
    std::lock_guard guard(pool_mu_);
    if (static_cast<int>(idle_.size()) < std::max(1, options_.pool_size)) {
      idle_.push_back(std::move(c));
    }
  }

  // Runs a script by EVALSHA (EVAL when its SHA is not known yet or the server lost it).
  // Retries once on a fresh connection when a pooled one turns out to be broken (e.g. Redis
  // restarted); the scripts are written so that a repeat is harmless.
  Result<Reply> Eval(ScriptId id, const std::vector<std::string>& keys,
                     const std::vector<std::string_view>& args, std::string_view lock) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool pooled;
      {
        std::lock_guard guard(pool_mu_);
        pooled = !idle_.empty();
      }
      auto ctx = Take();
      if (!ctx.ok()) return ctx.status();
      Context c = std::move(ctx).value();
      std::string sha;
      {
        std::lock_guard guard(pool_mu_);
        sha = shas_[id];
      }
      std::string nkeys = std::to_string(keys.size());
      std::vector<const char*> argv;
      std::vector<std::size_t> lens;
      auto push = [&](std::string_view s) {
        argv.push_back(s.data());
        lens.push_back(s.size());
      };
      push(sha.empty() ? "EVAL" : "EVALSHA");
      push(sha.empty() ? std::string_view(kScripts[id]) : std::string_view(sha));
      push(nkeys);
      for (const auto& k : keys) push(k);
      for (const auto& a : args) push(a);
      Reply r(static_cast<redisReply*>(
          redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
      if (!r) {
        std::string err = c->errstr;
        if (pooled && attempt == 0) continue;  // c is dropped; retry on a new connection
        return Status::Unavailable("no reply from " + service_ + " for lock \"" +
                                   std::string(lock) + "\": " + err);
      }
      if (r->type == REDIS_REPLY_ERROR) {
        std::string_view err(r->str, r->len);
        if (err.starts_with("NOSCRIPT")) {
          {
            std::lock_guard guard(pool_mu_);
            shas_[id].clear();  // EVAL reloads it into the server's cache
          }
          Give(std::move(c));
          --attempt;
          continue;
        }
        Give(std::move(c));
        return Status::Unavailable(service_ + " refused the request for lock \"" +
                                   std::string(lock) + "\": " + std::string(err));
      }
      if (sha.empty()) LearnSha(c.get(), id);
      Give(std::move(c));
      return r;
    }
    return Status::Unavailable("no reply from " + service_);
  }

  void LearnSha(redisContext* c, ScriptId id) {
    const char* argv[] = {"SCRIPT", "LOAD", kScripts[id]};
    std::size_t lens[] = {6, 4, std::strlen(kScripts[id])};
    Reply r(static_cast<redisReply*>(redisCommandArgv(c, 3, argv, lens)));
    if (r && r->type == REDIS_REPLY_STRING) {
      std::lock_guard guard(pool_mu_);
      shas_[id] = std::string(r->str, r->len);
    }
  }

  std::string host_;
  int port_;
  int db_;
  std::string password_;
  LockOptions options_;
  std::string service_;

  std::mutex pool_mu_;
  std::vector<Context> idle_;           // GUARDED_BY(pool_mu_)
  std::string shas_[kScriptCount];      // GUARDED_BY(pool_mu_)

  std::mutex seen_mu_;
  std::map<std::string, std::int64_t> seen_;  // GUARDED_BY(seen_mu_): highest token per lock
  std::atomic<std::uint64_t> counter_behind_{0};
};

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenRedisBackend(std::string_view uri,
                                                      const LockOptions& options) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) + "\" is invalid: " +
                                   std::string(why) + "; use redis://host:port[/db]");
  };
  auto url = boost::urls::parse_uri(uri);
  if (!url) return bad("it is not a URI");
  if (url->host().empty()) return bad("it names no host");
  int port = 6379;
  if (url->has_port()) {
    if (url->port_number() == 0) return bad("the port is not a number from 1 to 65535");
    port = url->port_number();
  }
  int db = 0;
  std::string path = url->path();
  if (!path.empty() && path != "/") {
    std::string_view digits = std::string_view(path).substr(1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), db);
    if (ec != std::errc() || end != digits.data() + digits.size() || db < 0) {
      return bad("the database must be a number, e.g. /0");
    }
  }
  std::string password = url->has_password() ? std::string(url->password()) : std::string();
  auto backend = std::make_unique<RedisBackend>(std::string(url->host_address()), port, db,
                                                password, options);
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit

// ---------------------------------------------------------------------------------------------
// Redlock: N independent Redis nodes, each a RedisBackend; a majority decides
// (../shared/reference/locking-primer.md §2). Tokens: each node's counter is bumped by its
// acquire script; the client takes the maximum over the granting majority and writes it back to
// a majority before returning, so any later majority, which overlaps that one, counts past it.

namespace fencekit {
namespace {

// Runs tasks for one node, in order, on its own thread: requests to different nodes overlap.
class NodeWorker {
 public:
  NodeWorker() : thread_([this] { Loop(); }) {}
  ~NodeWorker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // GUARDED_BY(mu_)
  bool stop_ = false;                        // GUARDED_BY(mu_)
  std::thread thread_;
};

struct Vote {
  enum State { kPending, kYes, kNo } state = kPending;
  Status status;
  std::int64_t token = 0;
  milliseconds remaining{0};
};

class RedlockBackend final : public LockBackend {
 public:
  RedlockBackend(std::vector<std::unique_ptr<RedisBackend>> nodes, const LockOptions& options,
                 std::string service)
      : nodes_(std::move(nodes)), options_(options), service_(std::move(service)) {
    quorum_ = static_cast<int>(nodes_.size()) / 2 + 1;
    if (!options_.redlock_sequential) {
      for (std::size_t i = 0; i < nodes_.size(); ++i) workers_.push_back(std::make_unique<NodeWorker>());
    }
  }

  Result<FencingToken> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                                  milliseconds* holder_remaining) override {
    auto start = std::chrono::steady_clock::now();
    std::int64_t floor = 0;
    {
      std::lock_guard guard(seen_mu_);
      if (auto it = seen_.find(std::string(lock)); it != seen_.end()) floor = it->second;
    }
    std::string lock_s(lock), owner_s(owner);
    auto votes = Round(
        [=, this](std::size_t i) {
          Vote v;
          milliseconds remaining{0};
          auto t = nodes_[i]->TryAcquireAbove(lock_s, owner_s, ttl, floor, &remaining);
          if (t.ok()) {
            v.state = Vote::kYes;
            v.token = t->value();
          } else {
            v.state = Vote::kNo;
            v.status = t.status();
            v.remaining = remaining;
          }
          return v;
        },
        /*stop_early=*/true);
    int yes = Count(votes, Vote::kYes);
    auto elapsed = std::chrono::steady_clock::now() - start;
    auto drift = std::chrono::duration_cast<milliseconds>(ttl * options_.drift_factor) +
                 options_.drift_min;
    if (yes >= quorum_ && elapsed < ttl - drift) {
      std::int64_t token = 0;
      for (const auto& v : votes) {
        if (v.state == Vote::kYes) token = std::max(token, v.token);
      }
      auto t = FencingToken::FromInt(token).value();
      // The write-back round: a majority must know the token before anyone uses it.
      auto written = Round([=, this](std::size_t i) {
        Vote v;
        Status s = nodes_[i]->RaiseCounter(lock_s, t);
        v.state = s.ok() ? Vote::kYes : Vote::kNo;
        v.status = s;
        return v;
      }, /*stop_early=*/true);
      if (Count(written, Vote::kYes) >= quorum_) {
        std::lock_guard guard(seen_mu_);
        auto& seen = seen_[lock_s];
        seen = std::max(seen, token);
        return t;
      }
      votes = written;
    }
    // Failed: give back what was won, on every node, including those whose reply was lost.
    ReleaseEverywhere(lock_s, owner_s, /*wait_all=*/true);
    int busy = 0;
    for (const auto& v : votes) {
      if (v.state == Vote::kNo && v.status.IsBusy()) {
        ++busy;
        *holder_remaining = std::max(*holder_remaining, v.remaining);
      }
    }
    std::string detail = Detail(votes);
    if (busy > 0) return Status::Busy(Subject(lock, service_) + " is held (" + detail + ")");
    if (yes >= quorum_) {
      return Status::Unavailable(Subject(lock, service_) + ": a majority granted, but too late "
                                 "for the ttl or the token could not be recorded (" + detail + ")");
    }
    return Status::Unavailable("no majority (" + std::to_string(quorum_) + " of " +
                               std::to_string(nodes_.size()) + ") for " + Subject(lock, service_) +
                               ": " + detail);
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    auto start = std::chrono::steady_clock::now();
    std::string lock_s(lock), owner_s(owner);
    auto votes = Round([=, this](std::size_t i) {
      Vote v;
      Status s = nodes_[i]->Extend(lock_s, owner_s, token, ttl);
      v.state = s.ok() ? Vote::kYes : Vote::kNo;
      v.status = s;
      return v;
    }, /*stop_early=*/true);
    if (Count(votes, Vote::kYes) >= quorum_ && std::chrono::steady_clock::now() - start < ttl) {
      return Status::Ok();
    }
    int not_held = 0;
    std::string example;
    for (const auto& v : votes) {
      if (v.state == Vote::kNo && v.status.IsNotHeld()) {
        ++not_held;
        if (example.empty()) example = "; for example: " + v.status.message();
      }
    }
    std::string msg = "cannot extend " + Subject(lock, service_) + ": no majority (" +
                      Detail(votes) + ")" + example;
    if (not_held > static_cast<int>(nodes_.size()) - quorum_) return Status::NotHeld(msg);
    return Status::Unavailable(msg);
  }

  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    auto votes = ReleaseEverywhere(std::string(lock), std::string(owner), /*wait_all=*/false);
    int yes = Count(votes, Vote::kYes), not_held = 0;
    std::string example;
    for (const auto& v : votes) {
      if (v.state == Vote::kNo && v.status.IsNotHeld()) {
        ++not_held;
        if (example.empty()) example = v.status.message();
      }
    }
    if (yes >= quorum_) return Status::Ok();
    // A leftover key on a minority of nodes does not make a lease: say it was lost.
    if (not_held > static_cast<int>(nodes_.size()) - quorum_) {
      return Status::NotHeld("a majority of nodes no longer hold the lease (" + Detail(votes) +
                             "); for example: " + example);
    }
    if (yes > 0) return Status::Ok();  // the nodes that did not answer expire the key
    return Status::Unavailable("cannot release " + Subject(lock, service_) + ": " + Detail(votes));
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    std::vector<LockInfo> infos;
    std::string errors;
    for (auto& n : nodes_) {
      auto i = n->Inspect(lock);
      if (i.ok()) {
        infos.push_back(*i);
      } else {
        errors += n->address() + ": " + i.status().message() + "; ";
      }
    }
    if (static_cast<int>(infos.size()) < quorum_) {
      return Status::Unavailable("cannot inspect " + Subject(lock, service_) + ": " + errors);
    }
    LockInfo out;
    out.lock = std::string(lock);
    std::map<std::string, int> owners;
    for (const auto& i : infos) {
      if (i.held) ++owners[i.owner];
      if (i.last_token && (!out.last_token || *i.last_token > *out.last_token)) {
        out.last_token = i.last_token;
      }
    }
    // Held while a majority holds it: the quorum-th longest remaining time among the holders.
    std::vector<milliseconds> remaining;
    for (const auto& i : infos) {
      if (i.held && owners[i.owner] >= quorum_) {
        if (!out.held) {
          out = LockInfo{std::string(lock), true, i.owner, i.token, i.remaining, out.last_token};
        }
        out.token = std::max(*out.token, *i.token);
        remaining.push_back(i.remaining);
      }
    }
    if (out.held) {
      std::sort(remaining.rbegin(), remaining.rend());
      out.remaining = remaining[static_cast<std::size_t>(quorum_ - 1)];
    }
    return out;
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    // Redlock has no wake-up signal: retry after a random delay, so that clients that split
    // the votes do not retry in lockstep.
    thread_local std::minstd_rand rng(std::random_device{}());
    auto cap = std::max<long long>(1, std::min<long long>(max_wait.count(), 50));
    std::this_thread::sleep_for(milliseconds(1 + static_cast<long long>(rng() % cap)));
  }

  const std::string& service() const override { return service_; }

 private:
  static int Count(const std::vector<Vote>& votes, Vote::State s) {
    int n = 0;
    for (const auto& v : votes) n += v.state == s;
    return n;
  }

  std::string Detail(const std::vector<Vote>& votes) const {
    std::string granted, refused, failed, pending;
    for (std::size_t i = 0; i < votes.size(); ++i) {
      std::string a = nodes_[i]->address();
      switch (votes[i].state) {
        case Vote::kYes: granted += (granted.empty() ? "" : ", ") + a; break;
        case Vote::kPending: pending += (pending.empty() ? "" : ", ") + a; break;
        case Vote::kNo:
          if (votes[i].status.IsBusy() || votes[i].status.IsNotHeld()) {
            refused += (refused.empty() ? "" : ", ") + a;
          } else {
            failed += (failed.empty() ? "" : ", ") + a + " (" + votes[i].status.message() + ")";
          }
          break;
      }
    }
    std::string out;
    auto add = [&](const char* what, const std::string& list) {
      if (list.empty()) return;
      if (!out.empty()) out += "; ";
      out += what + list;
    };
    add("granted by ", granted);
    add("refused by ", refused);
    add("failed or timed out: ", failed);
    add("no answer yet: ", pending);
    return out;
  }

  // Sends the release to every node. With `wait_all` false it returns once a majority answered
  // (the rest still run, in order, on their node's worker, before any later request there); a
  // failed acquire waits for all, so that what it won is given back before it retries.
  std::vector<Vote> ReleaseEverywhere(const std::string& lock, const std::string& owner,
                                      bool wait_all) {
    return Round([=, this](std::size_t i) {
      Vote v;
      Status s = nodes_[i]->Release(lock, owner, FencingToken());
      v.state = s.ok() ? Vote::kYes : Vote::kNo;
      v.status = s;
      return v;
    }, /*stop_early=*/!wait_all);
  }

  // Asks every node; with `stop_early`, returns once a majority said yes or can no longer.
  template <typename Op>
  std::vector<Vote> Round(Op op, bool stop_early) {
    const int n = static_cast<int>(nodes_.size());
    auto done = [&](int yes, int no) {
      return yes + no == n || (stop_early && (yes >= quorum_ || no > n - quorum_));
    };
    if (options_.redlock_sequential) {
      std::vector<Vote> votes(nodes_.size());
      int yes = 0, no = 0;
      for (std::size_t i = 0; i < nodes_.size() && !done(yes, no); ++i) {
        votes[i] = op(i);
        (votes[i].state == Vote::kYes ? yes : no)++;
      }
      return votes;
    }
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      std::vector<Vote> votes;
      int yes = 0, no = 0;
    };
    auto shared = std::make_shared<Shared>();
    shared->votes.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      workers_[i]->Post([shared, op, i] {
        Vote v = op(i);
        std::lock_guard lock(shared->mu);
        (v.state == Vote::kYes ? shared->yes : shared->no)++;
        shared->votes[i] = std::move(v);
        shared->cv.notify_all();
      });
    }
    std::unique_lock lock(shared->mu);
    shared->cv.wait(lock, [&] { return done(shared->yes, shared->no); });
    return shared->votes;
  }

  std::vector<std::unique_ptr<RedisBackend>> nodes_;
  LockOptions options_;
  std::string service_;
  int quorum_ = 1;
  std::vector<std::unique_ptr<NodeWorker>> workers_;
  std::mutex seen_mu_;
  std::map<std::string, std::int64_t> seen_;  // GUARDED_BY(seen_mu_)
};

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenRedlockBackend(std::string_view uri,
                                                        const LockOptions& options) {
  std::string_view rest = uri.substr(std::string_view("redlock://").size());
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) + "\" is invalid: " +
                                   std::string(why) + "; use redlock://h1:p1,h2:p2,h3:p3");
  };
  LockOptions node_options = options;
  node_options.op_timeout = options.redlock_node_timeout;
  node_options.pool_size = 2;
  std::vector<std::unique_ptr<RedisBackend>> nodes;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view node = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    auto colon = node.rfind(':');
    if (node.empty() || colon == std::string_view::npos) return bad("every node needs host:port");
    int port = 0;
    auto p = node.substr(colon + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535) {
      return bad("\"" + std::string(node) + "\" has no valid port");
    }
    nodes.push_back(std::make_unique<RedisBackend>(std::string(node.substr(0, colon)), port, 0,
                                                   "", node_options));
  }
  if (nodes.size() < 3) return bad("Redlock needs at least 3 nodes");
  return std::unique_ptr<LockBackend>(
      std::make_unique<RedlockBackend>(std::move(nodes), options, std::string(uri)));
}

}  // namespace fencekit
