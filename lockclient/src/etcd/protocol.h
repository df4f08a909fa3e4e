// The etcd lock protocol: the key layout of a lock's line of contenders, and the gateway calls
// that read and change it (leases, the enqueue txn, reads of the line, watches), each reply
// parsed into a plain value. It decides nothing: EtcdBackend does. Private to lockclient.
//
// A lock is a line of keys under <prefix>lock/<length>:<name>/, one per contender, each
// attached to that contender's etcd lease. The key with the lowest create_revision holds the
// lock, and that revision is the fencing token. <prefix>last/<length>:<name> is written by
// every enqueue: its mod_revision is the last token issued. <prefix>released/<length>:<name>
// holds the owner of the lock's last release (without a lease: it stays, as the last key does),
// so that a second release of that lease can say so. The prefix is "fencekit/" unless
// the URI says otherwise (?prefix=); every key this client touches is under it, so an etcd
// user needs readwrite permission on that prefix only.
//
// Gateway quirks (etcd 3.4): int64 fields are JSON strings, keys and values are base64, default
// values are omitted (a failed txn has no "succeeded", a PUT event has no "type", an expired
// lease's keep-alive has no "TTL"), and streaming calls answer one JSON object per line.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/gateway.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"

namespace fencekit::lockclient::etcd {

// The longest TTL, in seconds, the calls below report. A larger one in a reply (no lease lasts
// a century) is cut to it, so that callers can turn it into milliseconds and add it to a time
// point without overflow.
inline constexpr std::int64_t kMaxTtlSeconds = std::int64_t{100} * 365 * 24 * 3600;

// A contender's etcd lease.
struct LeaseRef {
  std::int64_t id = 0;
  std::int64_t ttl_s = 0;  // as granted (etcd may raise it to its minimum); 0 .. kMaxTtlSeconds
};

// Where a contender stands in a lock's line.
struct Place {
  std::int64_t mine = 0;         // the contender key's create_revision: its token; 0 if gone
  std::string first_key;         // base64; empty when the line is empty
  std::int64_t first_rev = 0;    // the holder's token
  std::int64_t first_lease = 0;  // the holder's lease
  std::string predecessor;       // base64 key just before mine; empty when I am first
  std::int64_t revision = 0;     // the store revision this view was read at
  std::string service;           // "etcd:<cluster id hex>", from the reply's header
  // Enqueue only: the lease of this contender's key when the key was already there (an
  // earlier attempt whose reply was lost).
  std::optional<std::int64_t> existing_lease;
};

// A contender's key as read back.
struct ContenderKey {
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
};

// The head of a lock's line, for Inspect.
struct LineHead {
  std::int64_t last_issued = 0;  // 0 when no token was ever issued
  bool held = false;
  std::string owner;  // when held
  std::int64_t token = 0;
  std::int64_t lease = 0;
  std::string service;  // "etcd:<cluster id hex>"
};

// Why a contender's key is not (or no longer) its grant, for a kNotHeld message.
struct Gone {
  bool released = false;               // the lock's last release was this owner's
  std::optional<std::int64_t> holder;  // the holder's token, when the lock is held
};

// What ReleaseKey did.
struct ReleasedKey {
  bool done = false;  // the key was the grant's, and is deleted
  Gone gone;          // when not done: why
};

// The holder of a lock as one linearizable read saw it, for CheckToken.
struct Holder {
  std::optional<std::int64_t> token;  // the first key's create_revision, when held
  std::string service;                // "etcd:<cluster id hex>"
};

// Thread safety: safe for concurrent use.
class EtcdProtocol {
 public:
  // `service`: the URI without its password, for messages. `key_prefix` passes
  // CheckEtcdKeyPrefix (etcd/uri.h).
  EtcdProtocol(std::vector<Endpoint> endpoints, std::chrono::milliseconds op_timeout, int pool_size,
               std::string service, GatewayAccess access = {}, std::string key_prefix = "fencekit/",
               Clock* clock = nullptr);

  // The base64 key of `owner`'s place in `lock`'s line.
  std::string Key(std::string_view lock, std::string_view owner) const;
  // Whole seconds for a ttl, at least 1.
  static std::int64_t Seconds(std::chrono::milliseconds ttl);

  // --- Leases ---
  Result<LeaseRef> GrantLease(std::chrono::milliseconds ttl);
  // Seconds the lease has left after the keep-alive; 0 when it is gone.
  Result<std::int64_t> KeepAlive(std::int64_t id);
  // kNotFound when the lease is gone; *sends as Gateway::Call.
  Status Revoke(std::int64_t id, int* sends);
  // Time left on a lease; 0 when unknown or gone.
  std::chrono::milliseconds Remaining(std::int64_t lease_id);
  // The TTL the lease was granted with (0 when unknown).
  std::int64_t GrantedTtl(std::int64_t lease_id);

  // --- The line ---
  // Puts `owner`'s key at the end of the line (or finds it, from an earlier attempt). The
  // place's `mine` is >= 1.
  Result<Place> Enqueue(std::string_view lock, std::string_view owner, LeaseRef lease);
  // Reads the line again: the holder, this waiter's key, and the key just before it.
  Result<Place> Look(std::string_view lock, std::string_view owner, std::int64_t mine);
  // `owner`'s key in the line, if there.
  Result<std::optional<ContenderKey>> ReadKey(std::string_view lock, std::string_view owner);
  // Deletes `owner`'s key if it is still `token`'s grant and records `owner` as the lock's last
  // release, in one txn; else reads why it is not (one round trip either way). *sends as
  // Gateway::Call: above 1, the txn may have run before the one that answered.
  Result<ReleasedKey> ReleaseKey(std::string_view lock, std::string_view owner, FencingToken token,
                                 int* sends);
  // Why `owner`'s key is not its grant: one read of the last release and the holder.
  Result<Gone> WhyGone(std::string_view lock, std::string_view owner);
  Result<LineHead> ReadHead(std::string_view lock);
  // The first key of the line: one range read.
  Result<Holder> ReadHolder(std::string_view lock);
  // Moves `owner`'s key to lease `lease_id` if the key is still `token`'s grant; false if not.
  Result<bool> MoveKeyToLease(std::string_view lock, std::string_view owner, FencingToken token,
                              std::int64_t lease_id);
  // Whether a key (base64) exists.
  Result<bool> Exists(const std::string& key);

  // --- Watches ---
  // Watches `key` (base64) for deletion, once etcd confirmed the watch.
  Result<std::unique_ptr<GatewayConn>> WatchKey(const std::string& key);
  // Watches the whole line for deletions (not confirmed).
  Result<std::unique_ptr<GatewayConn>> WatchLine(std::string_view lock);
  // What one watch message says.
  static bool IsDeleteEvent(const std::string& message);
  static bool IsCanceled(const std::string& message);

  // A revision as a token; kUnavailable if etcd sent an unusable one.
  Result<FencingToken> Token(std::string_view lock, std::int64_t revision) const;

 private:
  // Gateway::Call, with what to do about kPermissionDenied.
  Result<boost::json::object> Call(std::string_view target, const boost::json::object& body,
                                   int* sends);
  // A watch on a new connection, once etcd confirmed it (`confirmed`) or at once.
  Result<std::unique_ptr<GatewayConn>> Watch(const boost::json::object& create, bool confirmed);
  Status WithPrefixHint(Status s) const;
  std::string Prefix(std::string_view lock) const;
  std::string PrefixEnd(std::string_view lock) const;
  std::string LastKey(std::string_view lock) const;
  std::string LastReleaseKey(std::string_view lock) const;
  // The reads of WhyGone, as txn operations: the lock's last release, then the holder.
  boost::json::array WhyGoneReads(std::string_view lock) const;
  boost::json::object RangeFirst(std::string_view lock) const;
  Status BadReply(std::string_view lock) const;

  Gateway gateway_;
  const std::string service_;
  const std::string key_prefix_;
};

}  // namespace fencekit::lockclient::etcd
