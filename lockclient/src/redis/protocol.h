// The Redis lock protocol: key names, the Lua scripts that grant, extend, release and inspect
// leases atomically on one node, their arguments, and what their replies mean. No I/O: the
// scripts run through RedisNode. Private to lockclient.
//
// Keys per lock share the hash tag {name}: fencekit:{name}:lock holds "owner:token" with a PX
// expiry; fencekit:{name}:token is the never-expiring counter; fencekit:{name}:signal is the
// list a release pushes to, so a waiter blocked in BLPOP wakes at once; fencekit:{name}:waiting
// says someone waits, so an uncontended release skips the signal; fencekit:{name}:released
// holds the owner of the lock's last release (never expires, as the counter), so that a second
// release of that lease, from any process, can say so. fencekit:service holds the service id,
// made by the first grant on an empty server and lost with the counters.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit::lockclient::redis_protocol {

// The most elements a reply's array may declare. The scripts answer at most 4, BLPOP 2.
inline constexpr int kMaxReplyElements = 64;
// Makes `reader` refuse an array reply that declares more than kMaxReplyElements elements
// before allocating anything for it (hiredis 0.14 allocates the declared count at once, so
// "*372054775" alone would cost 3 GB): the read fails as hiredis's "out of memory" error and
// the connection is dropped. Called on every connection a RedisNode opens.
void BoundReplyArrays(redisReader* reader);

// The scripts, by their index in Scripts().
enum Script { kAcquire, kRelease, kExtend, kInspect, kRaise, kCheck, kServiceId, kScriptCount };
std::span<const char* const> Scripts();

// "fencekit:{lock}:kind".
std::string Key(std::string_view lock, std::string_view kind);

// "fencekit:service": the key of the service id. kServiceId's only key; its args are
// {candidate, id to replace or ""}, its reply the id (ParseServiceId).
std::string ServiceKey();

// Arguments of each script.
std::vector<std::string> AcquireKeys(std::string_view lock);
// `floor`: the highest token this client has seen for the lock (0: none); the grant's token is
// above it even if the node's counter is not. `candidate`: the service id to set if the server
// has none; fresh from the CSPRNG for each grant, so an emptied server never gets an old id.
std::vector<std::string> AcquireArgs(std::string_view owner, std::chrono::milliseconds ttl,
                                     std::int64_t floor, std::string_view candidate);
// Keys of kRelease (release = true) or kExtend; their args are OwnerArgs.
std::vector<std::string> OwnerKeys(std::string_view lock, bool release);
// `ttl`: the new ttl (extend), or how long a release signal waits for a waiter (release).
// `remember`: a release records `owner` as the lock's last release (a lease's release does; a
// failed Redlock attempt giving back what it won does not). Extend ignores it.
std::vector<std::string> OwnerArgs(std::string_view owner, std::chrono::milliseconds ttl,
                                   bool remember = true);
std::vector<std::string> InspectKeys(std::string_view lock);
std::vector<std::string> RaiseKeys(std::string_view lock);
// The lease's token and owner, and the granting majority's service id.
std::vector<std::string> RaiseArgs(std::int64_t token, std::string_view owner,
                                   std::string_view service);
std::vector<std::string> CheckKeys(std::string_view lock);  // no args

// The longest remaining time the parsers report. A larger one in a reply (no lease lasts a
// century; Redis reports at most the ttl it was given) is cut to this, so that callers can add it
// to a steady_clock time point without overflow.
inline constexpr std::chrono::milliseconds kMaxRemaining = std::chrono::hours(24 * 365 * 100);

// The acquire script's reply.
struct AcquireReply {
  bool granted = false;
  std::int64_t token = 0;                         // when granted
  bool counter_behind = false;                    // when granted: the counter was below the floor
  std::string service;                            // when granted: the service id
  std::chrono::milliseconds holder_remaining{0};  // when not granted; 0 .. kMaxRemaining
};
// kUnavailable (naming `service` and `lock`) for a reply of the wrong shape.
Result<AcquireReply> ParseAcquire(const redisReply* r, std::string_view service,
                                  std::string_view lock);

// The release and extend scripts' reply: OK, or kNotHeld saying whether this lease was already
// released, expired, or another owner holds the lock. `what`: "release" or "extend", for the
// message.
Status ParseOwnerChecked(const redisReply* r, std::string_view service, std::string_view lock,
                         std::string_view what);
// True when a release or extend reply says this owner's lease was already released.
bool SaysAlreadyReleased(const redisReply* r);
// True when a release or extend reply says another owner holds the lock.
bool SaysHeldByAnother(const redisReply* r);

// The check script's reply.
struct CheckReply {
  std::optional<FencingToken> holder;  // the live holder's token, when held
  std::string owner;                   // when held
  std::string service;                 // empty when the server has no id
};
Result<CheckReply> ParseCheck(const redisReply* r, std::string_view service, std::string_view lock);

// The service id script's reply.
Result<std::string> ParseServiceId(const redisReply* r, std::string_view service);

// The inspect script's reply; `remaining` is 0 .. kMaxRemaining.
Result<LockInfo> ParseInspect(const redisReply* r, std::string_view service, std::string_view lock);

}  // namespace fencekit::lockclient::redis_protocol
