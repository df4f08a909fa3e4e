// The Redis lock service: one node, hiredis, Lua scripts run with EVALSHA.
//
// Keys per lock share the hash tag {name}: fencekit:{name}:lock holds "owner:token" with a PX
// expiry; fencekit:{name}:token is the never-expiring counter; fencekit:{name}:signal is the
// list a release pushes to, so a waiter blocked in BLPOP wakes at once; fencekit:{name}:waiting
// says someone waits, so an uncontended release skips the signal.
#include <hiredis/hiredis.h>
#include <poll.h>

#include <atomic>
#include <boost/url/parse.hpp>
#include <charconv>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend.h"

namespace fencekit {
namespace {

using std::chrono::milliseconds;

// The highest token this client has seen per lock, for the `capacity` locks it used most
// recently (the least recently used is forgotten first, so a client that touches many lock
// names does not grow without bound). Thread safety: safe for concurrent use.
class SeenTokens {
 public:
  explicit SeenTokens(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  // 0 when the lock is not remembered.
  std::int64_t Floor(std::string_view lock) {
    std::lock_guard guard(mu_);
    auto it = tokens_.find(std::string(lock));
    if (it == tokens_.end()) return 0;
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }

  void Raise(std::string_view lock, std::int64_t token) {
    std::lock_guard guard(mu_);
    auto [it, added] = tokens_.try_emplace(std::string(lock));
    if (added) {
      order_.push_front(it->first);
      it->second = {token, order_.begin()};
      if (tokens_.size() > capacity_) {
        tokens_.erase(order_.back());
        order_.pop_back();
      }
      return;
    }
    it->second.first = std::max(it->second.first, token);
    order_.splice(order_.begin(), order_, it->second.second);
  }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::list<std::string> order_;  // GUARDED_BY(mu_): most recently used first
  std::unordered_map<std::string, std::pair<std::int64_t, std::list<std::string>::iterator>>
      tokens_;  // GUARDED_BY(mu_)
};

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

enum ScriptId { kAcquire, kRelease, kExtend, kInspect, kRaise, kScriptCount };
constexpr const char* kScripts[kScriptCount] = {kAcquireScript, kReleaseScript, kExtendScript,
                                                kInspectScript, kRaiseScript};

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
  RedisBackend(std::string host, int port, int db, std::string password, const LockOptions& options)
      : host_(std::move(host)),
        port_(port),
        db_(db),
        password_(std::move(password)),
        options_(options),
        service_("redis://" + host_ + ":" + std::to_string(port_) + "/" + std::to_string(db_)),
        seen_(options.remembered_locks) {}

  Result<FencingToken> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                                  milliseconds* holder_remaining) override {
    return TryAcquireAbove(lock, owner, ttl, seen_.Floor(lock), holder_remaining);
  }

  // One node's grant, with a token above `floor`.
  Result<FencingToken> TryAcquireAbove(std::string_view lock, std::string_view owner,
                                       milliseconds ttl, std::int64_t floor,
                                       milliseconds* holder_remaining) {
    auto reply = Eval(kAcquire, AcquireKeys(lock), AcquireArgs(owner, ttl, floor), lock);
    if (!reply.ok()) return reply.status();
    return ParseAcquire(reply->get(), lock, holder_remaining);
  }

  static std::vector<std::string> AcquireKeys(std::string_view lock) {
    return {Key(lock, "lock"), Key(lock, "token"), Key(lock, "waiting")};
  }
  static std::vector<std::string> AcquireArgs(std::string_view owner, milliseconds ttl,
                                              std::int64_t floor) {
    return {std::string(owner), std::to_string(ttl.count()), std::to_string(floor)};
  }
  static std::vector<std::string> OwnerKeys(std::string_view lock, bool release) {
    if (!release) return {Key(lock, "lock")};
    return {Key(lock, "lock"), Key(lock, "signal"), Key(lock, "waiting")};
  }

  // The acquire script's reply: the token, or kBusy with *holder_remaining set.
  Result<FencingToken> ParseAcquire(const redisReply* r, std::string_view lock,
                                    milliseconds* holder_remaining) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return BadReply(lock);
    if (r->element[0]->integer == 0) {
      *holder_remaining = milliseconds(std::max<long long>(0, r->element[1]->integer));
      return Status::Busy(Subject(lock, service_) + " is held");
    }
    std::int64_t token = r->element[1]->integer;
    if (r->elements > 2 && r->element[2]->integer == 1) counter_behind_.fetch_add(1);
    seen_.Raise(lock, token);
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
    auto conn = Take();
    if (!conn.ok()) return;
    Context c = std::move(conn->c);
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
    auto reply = Eval(kRaise, RaiseKeys(lock), {token.ToString()}, lock);
    return reply.ok() ? Status::Ok() : reply.status();
  }
  static std::vector<std::string> RaiseKeys(std::string_view lock) { return {Key(lock, "token")}; }
  // host:port, for per-node messages.
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  Status OwnerChecked(ScriptId id, std::string_view lock, std::string_view owner,
                      FencingToken token, milliseconds ttl, std::string_view what) {
    // Owner ids are unique per grant, so the owner alone identifies the lease (Redlock's nodes
    // hold the same owner with different per-node tokens).
    (void)token;
    auto reply = Eval(id, OwnerKeys(lock, id == kRelease),
                      {std::string(owner), std::to_string(ttl.count())}, lock);
    if (!reply.ok()) return reply.status();
    return ParseOwnerChecked(reply->get(), lock, what);
  }

 public:
  // The release and extend scripts' reply.
  Status ParseOwnerChecked(const redisReply* r, std::string_view lock, std::string_view what) {
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

  // A connection from the pool (pooled = true) or a new one. A pooled connection may still owe
  // replies to requests whose answers nobody waited for (a Redlock round that ended early):
  // they are read and dropped first.
  struct Conn {
    Context c;
    bool pooled = false;
  };
  Result<Conn> Take() {
    for (;;) {
      Idle idle;
      {
        std::lock_guard guard(pool_mu_);
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
    Context c(redisConnectWithTimeout(host_.c_str(), port_, tv));
    if (c == nullptr || c->err) {
      return Status::Unavailable("cannot connect to " + service_ + ": " +
                                 (c ? c->errstr : "out of memory") +
                                 "; is redis-server running there?");
    }
    redisSetTimeout(c.get(), tv);
    redisEnableKeepAlive(c.get());
    if (!password_.empty()) {
      Reply r(static_cast<redisReply*>(
          redisCommand(c.get(), "AUTH %b", password_.data(), password_.size())));
      if (!r || r->type == REDIS_REPLY_ERROR) {
        return Status::Unavailable("authentication to " + service_ + " failed");
      }
    }
    if (db_ != 0) {
      Reply r(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", db_)));
      if (!r || r->type == REDIS_REPLY_ERROR) {
        return Status::InvalidArgument("cannot select database " + std::to_string(db_) + " on " +
                                       service_);
      }
    }
    return Conn{std::move(c), false};
  }

  // Returns a connection to the pool; `owed`: replies still to come for requests sent on it.
  void Give(Context c, int owed = 0) {
    if (c->err) return;  // broken: drop it, the next Take reconnects
    std::lock_guard guard(pool_mu_);
    if (static_cast<int>(idle_.size()) < std::max(1, options_.pool_size)) {
      idle_.push_back(Idle{std::move(c), owed});
    }
  }

  // Drops every pooled connection (after one turned out broken, e.g. Redis restarted).
  void DropIdle() {
    std::lock_guard guard(pool_mu_);
    idle_.clear();
  }

  // Queues a script call in c's output buffer: EVALSHA, or EVAL while the SHA is unknown.
  // Returns whether it was EVAL (then LearnSha after the reply).
  bool Append(redisContext* c, ScriptId id, const std::vector<std::string>& keys,
              const std::vector<std::string>& args) {
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
    redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
    return sha.empty();
  }

  // True for the error a server gives when it does not know a script's SHA (it restarted, or
  // SCRIPT FLUSH); the caller forgets the SHA and sends EVAL.
  bool IsNoScript(const redisReply* r, ScriptId id) {
    if (r->type != REDIS_REPLY_ERROR || !std::string_view(r->str, r->len).starts_with("NOSCRIPT")) {
      return false;
    }
    std::lock_guard guard(pool_mu_);
    shas_[id].clear();
    return true;
  }

  Status Refused(const redisReply* r, std::string_view lock) {
    return Status::Unavailable(service_ + " refused the request for lock \"" + std::string(lock) +
                               "\": " + std::string(r->str, r->len));
  }

  // Runs a script and waits for its reply. Retries once on a fresh connection when a pooled one
  // turns out to be broken (e.g. Redis restarted); the scripts are written so that a repeat is
  // harmless.
  Result<Reply> Eval(ScriptId id, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args, std::string_view lock) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto conn = Take();
      if (!conn.ok()) return conn.status();
      redisContext* c = conn->c.get();
      bool eval = Append(c, id, keys, args);
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
        std::string err = c->errstr;
        if (conn->pooled && attempt == 0) {
          DropIdle();
          continue;
        }
        return Status::Unavailable("no reply from " + service_ + " for lock \"" +
                                   std::string(lock) + "\": " + err);
      }
      Reply r(static_cast<redisReply*>(raw));
      if (IsNoScript(r.get(), id)) {
        Give(std::move(conn->c));
        --attempt;
        continue;
      }
      if (r->type == REDIS_REPLY_ERROR) {
        Give(std::move(conn->c));
        return Refused(r.get(), lock);
      }
      if (eval) LearnSha(c, id);
      Give(std::move(conn->c));
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

 private:
  struct Idle {
    Context c;
    int owed = 0;
  };

  std::string host_;
  int port_;
  int db_;
  std::string password_;
  LockOptions options_;
  std::string service_;

  std::mutex pool_mu_;
  std::vector<Idle> idle_;          // GUARDED_BY(pool_mu_)
  std::string shas_[kScriptCount];  // GUARDED_BY(pool_mu_)

  SeenTokens seen_;
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
  auto backend =
      std::make_unique<RedisBackend>(std::string(url->host_address()), port, db, password, options);
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

struct Vote {
  enum State { kPending, kYes, kNo } state = kPending;
  Status status;
  std::int64_t token = 0;
  milliseconds remaining{0};
};

// Counters behind NodeMetrics.
struct NodeCounters {
  std::atomic<std::uint64_t> requests{0}, granted{0}, refused{0}, failed{0}, timed_out{0};
};

// Thread safety: safe for concurrent use; each call runs its rounds on the calling thread.
class RedlockBackend final : public LockBackend {
 public:
  RedlockBackend(std::vector<std::unique_ptr<RedisBackend>> nodes, const LockOptions& options,
                 std::string service)
      : nodes_(std::move(nodes)),
        counters_(nodes_.size()),
        options_(options),
        service_(std::move(service)),
        seen_(options.remembered_locks) {
    quorum_ = static_cast<int>(nodes_.size()) / 2 + 1;
  }

  Result<FencingToken> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                                  milliseconds* holder_remaining) override {
    auto start = std::chrono::steady_clock::now();
    const std::int64_t floor = seen_.Floor(lock);
    const std::vector<bool> all(nodes_.size(), true);
    auto votes = Round(kAcquire, RedisBackend::AcquireKeys(lock),
                       RedisBackend::AcquireArgs(owner, ttl, floor), all, quorum_,
                       /*stop_early=*/true, [&](std::size_t i, const redisReply* r) {
                         Vote v;
                         auto t = nodes_[i]->ParseAcquire(r, lock, &v.remaining);
                         v.state = t.ok() ? Vote::kYes : Vote::kNo;
                         if (t.ok()) v.token = t->value();
                         if (!t.ok()) v.status = t.status();
                         return v;
                       });
    int yes = Count(votes, Vote::kYes);
    auto elapsed = std::chrono::steady_clock::now() - start;
    auto drift =
        std::chrono::duration_cast<milliseconds>(ttl * options_.drift_factor) + options_.drift_min;
    if (yes >= quorum_ && elapsed < ttl - drift) {
      std::int64_t token = 0;
      for (const auto& v : votes) {
        if (v.state == Vote::kYes) token = std::max(token, v.token);
      }
      auto t = FencingToken::FromInt(token).value();
      // A majority must know the token before anyone uses it. Nodes that granted with this very
      // token already do (their counter is at it); the write-back round asks the others, and
      // only when those are fewer than a majority (counters out of step after contention or a
      // node's data loss).
      int know = 0;
      std::vector<bool> ask(nodes_.size(), true);
      for (std::size_t i = 0; i < votes.size(); ++i) {
        if (votes[i].state == Vote::kYes && votes[i].token == token) {
          ++know;
          ask[i] = false;
        }
      }
      bool recorded = know >= quorum_;
      if (!recorded) {
        auto written = Round(kRaise, RedisBackend::RaiseKeys(lock), {t.ToString()}, ask,
                             quorum_ - know, /*stop_early=*/true,
                             [](std::size_t, const redisReply*) { return Vote{Vote::kYes}; });
        recorded = know + Count(written, Vote::kYes) >= quorum_;
        if (!recorded) votes = written;
      }
      if (recorded) {
        seen_.Raise(lock, token);
        return t;
      }
    }
    // Failed: give back what was won, on every node, including those whose reply was lost.
    ReleaseEverywhere(lock, owner, /*wait_all=*/true);
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
      return Status::Unavailable(Subject(lock, service_) +
                                 ": a majority granted, but too late "
                                 "for the ttl or the token could not be recorded (" +
                                 detail + ")");
    }
    return Status::Unavailable("no majority (" + std::to_string(quorum_) + " of " +
                               std::to_string(nodes_.size()) + ") for " + Subject(lock, service_) +
                               ": " + detail);
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken,
                milliseconds ttl) override {
    auto start = std::chrono::steady_clock::now();
    auto votes = OwnerRound(kExtend, lock, owner, ttl, "extend", /*stop_early=*/true);
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

  Status Release(std::string_view lock, std::string_view owner, FencingToken) override {
    auto votes = ReleaseEverywhere(lock, owner, /*wait_all=*/false);
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
    (void)lock;
    thread_local std::minstd_rand rng(std::random_device{}());
    auto cap = std::max<long long>(1, std::min<long long>(max_wait.count(), 50));
    std::this_thread::sleep_for(milliseconds(1 + static_cast<long long>(rng() % cap)));
  }

  const std::string& service() const override { return service_; }

  std::vector<NodeMetrics> node_metrics() const override {
    std::vector<NodeMetrics> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const NodeCounters& c = counters_[i];
      out.push_back(NodeMetrics{nodes_[i]->address(), c.requests.load(), c.granted.load(),
                                c.refused.load(), c.failed.load(), c.timed_out.load()});
    }
    return out;
  }

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
        case Vote::kYes:
          granted += (granted.empty() ? "" : ", ") + a;
          break;
        case Vote::kPending:
          pending += (pending.empty() ? "" : ", ") + a;
          break;
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
    add("not asked or no answer awaited: ", pending);
    return out;
  }

  std::vector<Vote> OwnerRound(ScriptId id, std::string_view lock, std::string_view owner,
                               milliseconds ttl, std::string_view what, bool stop_early) {
    return Round(id, RedisBackend::OwnerKeys(lock, id == kRelease),
                 {std::string(owner), std::to_string(ttl.count())},
                 std::vector<bool>(nodes_.size(), true), quorum_, stop_early,
                 [&](std::size_t i, const redisReply* r) {
                   Status s = nodes_[i]->ParseOwnerChecked(r, lock, what);
                   return Vote{s.ok() ? Vote::kYes : Vote::kNo, s};
                 });
  }

  // Sends the release to every node. With `wait_all` false it returns once a majority answered
  // (replies still due are read before the connection's next use); a failed acquire waits for
  // all, so that what it won is given back before it retries.
  std::vector<Vote> ReleaseEverywhere(std::string_view lock, std::string_view owner,
                                      bool wait_all) {
    return OwnerRound(kRelease, lock, owner, options_.ttl, "release", !wait_all);
  }

  // One round: the same script call to every node i with ask[i]. Returns once `need` of them
  // said yes or can no longer (with `stop_early`), once all answered, or at the node timeout.
  // Concurrent mode writes every request first, then reads the replies as they come with
  // poll(2), all on the calling thread; sequential mode asks one node after another.
  template <typename Parse>
  std::vector<Vote> Round(ScriptId id, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, const std::vector<bool>& ask,
                          int need, bool stop_early, Parse parse) {
    const std::size_t n = nodes_.size();
    std::vector<Vote> votes(n);
    int asked = 0, yes = 0, no = 0;
    for (bool a : ask) asked += a;
    auto done = [&] {
      return yes + no == asked || (stop_early && (yes >= need || no > asked - need));
    };
    auto record = [&](std::size_t i, Vote v) {
      NodeCounters& c = counters_[i];
      if (v.state == Vote::kYes) {
        ++yes;
        c.granted.fetch_add(1, std::memory_order_relaxed);
      } else {
        ++no;
        bool refused = v.status.IsBusy() || v.status.IsNotHeld();
        (refused ? c.refused : c.failed).fetch_add(1, std::memory_order_relaxed);
      }
      votes[i] = std::move(v);
    };
    auto reply_vote = [&](std::size_t i, const redisReply* r) {
      if (r->type == REDIS_REPLY_ERROR) {
        return Vote{Vote::kNo, nodes_[i]->Refused(r, keys.front())};
      }
      return parse(i, r);
    };

    if (options_.redlock_sequential) {
      for (std::size_t i = 0; i < n && !done(); ++i) {
        if (!ask[i]) continue;
        counters_[i].requests.fetch_add(1, std::memory_order_relaxed);
        auto r = nodes_[i]->Eval(id, keys, args, keys.front());
        record(i, r.ok() ? reply_vote(i, r->get()) : Vote{Vote::kNo, r.status()});
      }
      return votes;
    }

    struct Call {
      RedisBackend::Conn conn;
      bool active = false;
      bool eval = false;  // sent as EVAL: learn the SHA after the reply
      bool retried = false;
    };
    std::vector<Call> calls(n);
    auto send = [&](std::size_t i) {
      Call& call = calls[i];
      for (;;) {
        if (call.conn.c == nullptr) {
          auto conn = nodes_[i]->Take();
          if (!conn.ok()) {
            record(i, Vote{Vote::kNo, conn.status()});
            return;
          }
          call.conn = std::move(conn).value();
        }
        redisContext* c = call.conn.c.get();
        call.eval = nodes_[i]->Append(c, id, keys, args);
        int written = 0;
        while (!written && redisBufferWrite(c, &written) == REDIS_OK) {
        }
        if (written) {
          call.active = true;
          return;
        }
        // A pooled connection that broke (the node restarted): once more on a new one.
        if (call.conn.pooled && !call.retried) {
          call.retried = true;
          call.conn.c.reset();
          nodes_[i]->DropIdle();
          continue;
        }
        record(i, Vote{Vote::kNo, Status::Unavailable("cannot send to " + nodes_[i]->address() +
                                                      ": " + c->errstr)});
        call.conn.c.reset();
        return;
      }
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (ask[i]) {
        counters_[i].requests.fetch_add(1, std::memory_order_relaxed);
        send(i);
      }
    }

    const auto deadline = std::chrono::steady_clock::now() + options_.redlock_node_timeout;
    std::vector<pollfd> fds;
    std::vector<std::size_t> fd_node;
    while (!done()) {
      fds.clear();
      fd_node.clear();
      for (std::size_t i = 0; i < n; ++i) {
        if (calls[i].active) {
          fds.push_back(pollfd{calls[i].conn.c->fd, POLLIN, 0});
          fd_node.push_back(i);
        }
      }
      if (fds.empty()) break;
      auto left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= milliseconds(0)) break;
      int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
      if (ready < 0 && errno != EINTR) break;
      for (std::size_t k = 0; k < fds.size() && ready > 0; ++k) {
        if (fds[k].revents == 0) continue;
        std::size_t i = fd_node[k];
        Call& call = calls[i];
        redisContext* c = call.conn.c.get();
        if (redisBufferRead(c) != REDIS_OK) {
          call.active = false;
          std::string err = c->errstr;
          call.conn.c.reset();
          if (!call.retried && call.conn.pooled) {
            call.retried = true;
            nodes_[i]->DropIdle();
            send(i);
          } else {
            record(i, Vote{Vote::kNo, Status::Unavailable("no reply from " + nodes_[i]->address() +
                                                          ": " + err)});
          }
          continue;
        }
        void* raw = nullptr;
        if (redisGetReplyFromReader(c, &raw) != REDIS_OK || raw == nullptr) continue;
        Reply r(static_cast<redisReply*>(raw));
        call.active = false;
        if (nodes_[i]->IsNoScript(r.get(), id)) {
          send(i);  // as EVAL now
          continue;
        }
        if (call.eval && r->type != REDIS_REPLY_ERROR) nodes_[i]->LearnSha(c, id);
        record(i, reply_vote(i, r.get()));
        nodes_[i]->Give(std::move(call.conn.c));
      }
    }
    // Requests still out: past the deadline they count as timed out and their connection is
    // dropped (the reply may come at any time); after an early stop, the connection goes back
    // to the pool owing its reply.
    bool timed_out = !done();
    for (std::size_t i = 0; i < n; ++i) {
      Call& call = calls[i];
      if (!call.active) continue;
      if (timed_out) {
        counters_[i].timed_out.fetch_add(1, std::memory_order_relaxed);
        votes[i] =
            Vote{Vote::kNo,
                 Status::Unavailable("no reply within " +
                                     std::to_string(options_.redlock_node_timeout.count()) + "ms")};
      } else {
        nodes_[i]->Give(std::move(call.conn.c), /*owed=*/1);
      }
    }
    return votes;
  }

  std::vector<std::unique_ptr<RedisBackend>> nodes_;
  std::vector<NodeCounters> counters_;  // one per node
  LockOptions options_;
  std::string service_;
  int quorum_ = 1;
  SeenTokens seen_;
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
    nodes.push_back(std::make_unique<RedisBackend>(std::string(node.substr(0, colon)), port, 0, "",
                                                   node_options));
  }
  if (nodes.size() < 3) return bad("Redlock needs at least 3 nodes");
  return std::unique_ptr<LockBackend>(
      std::make_unique<RedlockBackend>(std::move(nodes), options, std::string(uri)));
}

}  // namespace fencekit
