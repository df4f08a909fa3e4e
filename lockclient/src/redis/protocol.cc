#include "redis/protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "lock_backend.h"

namespace fencekit::lockclient::redis_protocol {
namespace {

using std::chrono::milliseconds;

// Grants when free; a retry by the same owner gets its token back. Never lets the counter
// produce a token at or below ARGV[3], the highest this client has seen for the lock: if the
// counter was lost (Redis restarted empty, key evicted or deleted) tokens still go up for this
// client, and the reply says the counter was behind. When busy, it marks the lock as waited on
// (KEYS[3], expiring with the holder's lease plus a margin), atomically with the check, so a
// release that follows is sure to signal. A grant also reports the service id (KEYS[4]),
// setting the candidate ARGV[4] when there is none (a new or emptied server).
// Reply: {1, token, floored, service id} or {0, holder_pttl}.
constexpr const char* kAcquireScript = R"lua(
local v = redis.call('get', KEYS[1])
local function id()
  local s = redis.call('get', KEYS[4])
  if s then return s end
  redis.call('set', KEYS[4], ARGV[4])
  return ARGV[4]
end
if v then
  local sep = string.find(v, ':', 1, true)
  if sep and string.sub(v, 1, sep - 1) == ARGV[1] then
    return {1, tonumber(string.sub(v, sep + 1)), 0, id()}
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
return {1, t, floored, id()}
)lua";

// Reply: 1 released, -1 no such key (expired), -2 held by another owner (then also its value),
// -3 this owner's lease was released before (KEYS[4] holds the owner of the lock's last
// release). A release remembers its owner there when ARGV[3] is '1' (a Redlock attempt giving
// back what it won sends '0': it released no lease). Signals (one element on KEYS[2]) only when
// someone waits (KEYS[3]).
constexpr const char* kReleaseScript = R"lua(
local v = redis.call('get', KEYS[1])
if not v or string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. ':' then
  if redis.call('get', KEYS[4]) == ARGV[1] then return {-3} end
  if not v then return {-1} end
  return {-2, v}
end
redis.call('del', KEYS[1])
if ARGV[3] == '1' then redis.call('set', KEYS[4], ARGV[1]) end
if redis.call('exists', KEYS[3]) == 1 then
  redis.call('del', KEYS[2])
  redis.call('lpush', KEYS[2], 1)
  redis.call('pexpire', KEYS[2], ARGV[2])
end
return {1}
)lua";

// Reply: 1 extended, -1 expired, -2 held by another owner (then also its value), -3 this
// owner's lease was released (KEYS[2], as above).
constexpr const char* kExtendScript = R"lua(
local v = redis.call('get', KEYS[1])
if not v or string.sub(v, 1, string.len(ARGV[1]) + 1) ~= ARGV[1] .. ':' then
  if redis.call('get', KEYS[2]) == ARGV[1] then return {-3} end
  if not v then return {-1} end
  return {-2, v}
end
redis.call('pexpire', KEYS[1], ARGV[2])
return {1}
)lua";

// Redlock's write-back round: raises the counter (KEYS[1]) to at least ARGV[1]; when owner
// ARGV[2] holds the lock (KEYS[2]), makes its value carry the lease's token ARGV[1]; and makes
// the service id (KEYS[3]) ARGV[3], the granting majority's. Reply: the counter.
constexpr const char* kRaiseScript = R"lua(
local v = redis.call('get', KEYS[2])
if v and string.sub(v, 1, string.len(ARGV[2]) + 1) == ARGV[2] .. ':' then
  redis.call('set', KEYS[2], ARGV[2] .. ':' .. ARGV[1], 'KEEPTTL')
end
if redis.call('get', KEYS[3]) ~= ARGV[3] then redis.call('set', KEYS[3], ARGV[3]) end
local c = tonumber(redis.call('get', KEYS[1]) or '0')
local t = tonumber(ARGV[1])
if c < t then redis.call('set', KEYS[1], t) return t end
return c
)lua";

// Reply: {lock value or false, service id or false}, read atomically; changes nothing.
constexpr const char* kCheckScript = R"lua(
return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}
)lua";

// The service id (KEYS[1]); sets the candidate ARGV[1] when there is none, or when the id is
// ARGV[2] (not empty): a Redlock node adopting its majority's id. Reply: the id.
constexpr const char* kServiceIdScript = R"lua(
local s = redis.call('get', KEYS[1])
if s and (ARGV[2] == '' or s ~= ARGV[2]) then return s end
redis.call('set', KEYS[1], ARGV[1])
return ARGV[1]
)lua";

// Reply: {value or false, pttl, counter or false}.
constexpr const char* kInspectScript = R"lua(
return {redis.call('get', KEYS[1]), redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2])}
)lua";

constexpr const char* kScripts[kScriptCount] = {kAcquireScript,  kReleaseScript, kExtendScript,
                                                kInspectScript,  kRaiseScript,   kCheckScript,
                                                kServiceIdScript};

// The token in a lock key's "owner:token" value; 0 if there is none.
std::int64_t TokenOf(std::string_view value) {
  auto sep = value.find(':');
  std::int64_t t = 0;
  if (sep != std::string_view::npos) {
    std::from_chars(value.data() + sep + 1, value.data() + value.size(), t);
  }
  return t;
}

// A PTTL from a reply: -1 (no expiry) and -2 (no key) are 0, and more than kMaxRemaining is cut.
milliseconds Remaining(long long pttl) {
  return milliseconds(std::clamp<long long>(pttl, 0, kMaxRemaining.count()));
}

// hiredis's own array constructor, which CreateBoundedArray calls for arrays within the bound.
// Set once, before any reader uses CreateBoundedArray.
void* (*default_create_array)(const redisReadTask*, int) = nullptr;

void* CreateBoundedArray(const redisReadTask* task, int elements) {
  if (elements < 0 || elements > kMaxReplyElements) return nullptr;  // hiredis: out of memory
  return default_create_array(task, elements);
}

Status BadReply(std::string_view service, std::string_view lock) {
  return Status::Unavailable("unexpected reply from " + std::string(service) + " for lock \"" +
                             std::string(lock) + "\"");
}

}  // namespace

std::span<const char* const> Scripts() { return kScripts; }

void BoundReplyArrays(redisReader* reader) {
  // Every reader starts with hiredis's default functions: copied once, with arrays bounded.
  static redisReplyObjectFunctions bounded = [reader] {
    redisReplyObjectFunctions f = *reader->fn;
    default_create_array = f.createArray;
    f.createArray = CreateBoundedArray;
    return f;
  }();
  reader->fn = &bounded;
}

std::string Key(std::string_view lock, std::string_view kind) {
  std::string k = "fencekit:{";
  k += lock;
  k += "}:";
  k += kind;
  return k;
}

std::string ServiceKey() { return "fencekit:service"; }

std::vector<std::string> AcquireKeys(std::string_view lock) {
  return {Key(lock, "lock"), Key(lock, "token"), Key(lock, "waiting"), ServiceKey()};
}

std::vector<std::string> AcquireArgs(std::string_view owner, milliseconds ttl, std::int64_t floor,
                                     std::string_view candidate) {
  return {std::string(owner), std::to_string(ttl.count()), std::to_string(floor),
          std::string(candidate)};
}

std::vector<std::string> OwnerKeys(std::string_view lock, bool release) {
  if (!release) return {Key(lock, "lock"), Key(lock, "released")};
  return {Key(lock, "lock"), Key(lock, "signal"), Key(lock, "waiting"), Key(lock, "released")};
}

std::vector<std::string> OwnerArgs(std::string_view owner, milliseconds ttl, bool remember) {
  return {std::string(owner), std::to_string(ttl.count()), remember ? "1" : "0"};
}

std::vector<std::string> InspectKeys(std::string_view lock) {
  return {Key(lock, "lock"), Key(lock, "token")};
}

std::vector<std::string> RaiseKeys(std::string_view lock) {
  return {Key(lock, "token"), Key(lock, "lock"), ServiceKey()};
}

std::vector<std::string> RaiseArgs(std::int64_t token, std::string_view owner,
                                   std::string_view service) {
  return {std::to_string(token), std::string(owner), std::string(service)};
}

std::vector<std::string> CheckKeys(std::string_view lock) {
  return {Key(lock, "lock"), ServiceKey()};
}

Result<AcquireReply> ParseAcquire(const redisReply* r, std::string_view service,
                                  std::string_view lock) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return BadReply(service, lock);
  AcquireReply out;
  if (r->element[0]->integer == 0) {
    out.holder_remaining = Remaining(r->element[1]->integer);
    return out;
  }
  out.granted = true;
  out.token = r->element[1]->integer;
  if (r->elements < 4 || r->element[3]->type != REDIS_REPLY_STRING) return BadReply(service, lock);
  out.counter_behind = r->element[2]->integer == 1;
  out.service.assign(r->element[3]->str, r->element[3]->len);
  return out;
}

Result<CheckReply> ParseCheck(const redisReply* r, std::string_view service,
                              std::string_view lock) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return BadReply(service, lock);
  CheckReply out;
  if (r->element[0]->type == REDIS_REPLY_STRING) {
    std::string_view v(r->element[0]->str, r->element[0]->len);
    auto token = FencingToken::FromInt(TokenOf(v));
    if (!token.ok()) return BadReply(service, lock);
    out.owner = std::string(v.substr(0, v.find(':')));
    out.holder = *token;
  }
  if (r->element[1]->type == REDIS_REPLY_STRING) {
    out.service.assign(r->element[1]->str, r->element[1]->len);
  }
  return out;
}

Result<std::string> ParseServiceId(const redisReply* r, std::string_view service) {
  if (r->type != REDIS_REPLY_STRING) {
    return Status::Unavailable("unexpected reply from " + std::string(service) +
                               " to the service id script");
  }
  return std::string(r->str, r->len);
}

Status ParseOwnerChecked(const redisReply* r, std::string_view service, std::string_view lock,
                         std::string_view what) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) return BadReply(service, lock);
  switch (r->element[0]->integer) {
    case 1:
      return Status::Ok();
    case -3:
      return AlreadyReleased(what, lock, service);
    case -1:
      return Status::NotHeld("cannot " + std::string(what) + " " + Subject(lock, service) +
                             ": the lease expired (the key is gone); acquire again");
    default: {
      std::string other = r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING
                              ? std::string(r->element[1]->str, r->element[1]->len)
                              : std::string();
      return Status::NotHeld("cannot " + std::string(what) + " " + Subject(lock, service) +
                             ": it is held by another owner (token " +
                             std::to_string(TokenOf(other)) + "); this lease is lost");
    }
  }
}

namespace {
// The code of a release or extend reply (1, -1, -2 or -3); 0 for a reply of the wrong shape.
long long OwnerCheckedCode(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_INTEGER) {
    return 0;
  }
  return r->element[0]->integer;
}
}  // namespace

bool SaysAlreadyReleased(const redisReply* r) { return OwnerCheckedCode(r) == -3; }

bool SaysHeldByAnother(const redisReply* r) { return OwnerCheckedCode(r) == -2; }

Result<LockInfo> ParseInspect(const redisReply* r, std::string_view service,
                              std::string_view lock) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return BadReply(service, lock);
  LockInfo info;
  info.lock = std::string(lock);
  if (r->element[0]->type == REDIS_REPLY_STRING) {
    std::string_view v(r->element[0]->str, r->element[0]->len);
    info.held = true;
    info.owner = std::string(v.substr(0, v.find(':')));
    if (auto t = FencingToken::FromInt(TokenOf(v)); t.ok()) info.token = *t;
    info.remaining = Remaining(r->element[1]->integer);
  }
  if (r->element[2]->type == REDIS_REPLY_STRING) {
    std::int64_t last = std::atoll(std::string(r->element[2]->str, r->element[2]->len).c_str());
    if (auto t = FencingToken::FromInt(last); t.ok()) info.last_token = *t;
  }
  return info;
}

}  // namespace fencekit::lockclient::redis_protocol
