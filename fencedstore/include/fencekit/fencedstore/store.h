// FencedStore: a key-value store that refuses writes carrying a stale fencing token.
//
// Per lock name (a "fence") the store keeps the highest token it has accepted. A write (put or
// delete) names (lock, token, key) and is accepted iff token >= highest for that lock
// (token > highest in strict mode); then highest := token. The check, the write, the fence
// advance and the history record happen in one transaction (SQLite, or PostgreSQL where several
// stores may share one database), and a write is acknowledged only once that transaction is
// durable.
//
// Three more rules make the store trust no client (docs/architecture.md):
// - a key belongs to the lock of the write that created it (or to StoreOptions::lock_for); a
//   write naming another lock is refused kWrongLock until the key is deleted under its lock;
// - a fence belongs to the lock service of its first token (WriteRequest::service); a token of
//   another service is refused kWrongService;
// - with StoreOptions::verify, a token that would move a fence up is accepted only once the lock
//   service confirms it (kUnverifiedToken otherwise).
// Every refusal changes nothing but the history, which records it with its reason.
//
// A write may carry a precondition on the key's version (WriteRequest::if_version), checked in
// the same transaction after the fence: kPreconditionFailed when it does not hold. A batch
// (SubmitBatch) is several writes under one grant (lock, token), applied all or none: any
// refusal refuses the whole batch, even when other writes share its group commit.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/fencedstore/refusal.h"
#include "fencekit/fencedstore/types.h"

namespace fencekit {

enum class Durability {
  // WAL + synchronous=FULL: an acknowledged write survives a crash or power loss.
  kFull,
  // WAL + synchronous=NORMAL: survives a process crash, but may lose the last acknowledged
  // writes on power loss.
  kNormal,
};

// What a lock service says of a token, for verification on advance (StoreOptions::verify).
struct TokenVerdict {
  bool current = false;  // the token belongs to the lock's current holder
  std::string service;   // the lock service's identity (Lease::service)
};
// Asks the lock service whether `token` is the current holder's token of `lock`. Blocking. Any
// error means the service could not be asked (the write then fails closed).
using TokenVerifier =
    std::function<Result<TokenVerdict>(std::string_view lock, FencingToken token)>;

struct StoreOptions {
  // --- Affects behaviour ---
  // The database: a SQLite file's path (created if missing), or a PostgreSQL database's URI
  // ("postgresql://user@host:port/dbname", libpq's form: several hosts and
  // target_session_attrs=read-write work), where the store lives in the schema `fencekit`,
  // created if missing (docs/operations-postgresql.md).
  std::string path;
  // Default kFull. See Durability. On PostgreSQL, kFull refuses a server with fsync off and
  // raises a session's synchronous_commit=off to on; kNormal sets it off (a crash of the server
  // may then lose the last acknowledged writes).
  Durability durability = Durability::kFull;
  // When true, a write needs token > highest (exactly one write per grant). Default false:
  // token >= highest, so one holder may write many times under one grant.
  bool strict = false;
  // DEMONSTRATION ONLY. When true the store accepts every write whatever its token and its
  // lock service (Fencing-Service): the lost update that fencing prevents becomes possible. It
  // exists so the demo can show the failure. The fence still records the highest token seen.
  bool unguarded = false;
  // Number of most recent decisions kept in the history table. 0 disables the history.
  std::size_t history_limit = 10000;
  // Largest accepted key and lock name, in bytes. Names follow CheckName (common/names.h).
  std::size_t max_key_bytes = 1024;
  // Time source for history records and the shared linger's looks. Null means Clock::Real().
  // Not owned.
  Clock* clock = nullptr;
  // PostgreSQL: the longest wait for the database in one exchange (a batch's commit, a read).
  // Past it the connection is dropped and the writes fail with kUnavailable, unacknowledged.
  std::chrono::milliseconds database_timeout{30'000};
  // SQLite VFS name; empty for the default. Used by tests to inject I/O faults.
  std::string sqlite_vfs;
  // Keys bound to a lock before any write: (key prefix, lock). A write of a key under one of
  // these prefixes must name that lock (the longest prefix wins), else kWrongLock.
  std::vector<std::pair<std::string, std::string>> lock_for;
  // When true, a write without a service identity (WriteRequest::service) is refused
  // (kInvalidArgument).
  bool require_service = false;
  // When set, a write that would advance (or create) a fence is accepted only when `verify`
  // confirms its token (kUnverifiedToken otherwise; kTimeout when it cannot be asked). Writes at
  // the fence's current token need no call. Calls run on the store's own threads, never on the
  // caller's or the writer's; concurrent writes needing the same (lock, token) share one call.
  TokenVerifier verify;

  // Most writes of one batch (SubmitBatch), and most bytes of its keys and values together.
  // Larger batches fail with kInvalidArgument.
  std::size_t max_batch_writes = 1000;
  std::size_t max_batch_bytes = 16 << 20;

  // --- Affects performance ---
  // Most writes committed in one transaction (group commit). 1 commits each write on its own.
  // A batch (SubmitBatch) is never split: a transaction takes batches while it holds fewer.
  std::size_t max_batch = 256;
  // After a transaction of more than one write, how long the writer waits before the next for
  // more writes to join it (it goes at once when max_batch are queued): fewer, larger
  // transactions, each write waiting up to this long more. Pays where the database server's CPU
  // is what runs out, as with several fenced on one server with few cores; costs throughput
  // where the server would otherwise idle (docs/operations-postgresql.md). 0 never waits.
  std::chrono::microseconds batch_linger{0};
  // With batch_linger 0: the linger while another store's writer is committing to the same
  // database (PostgreSQL: looked at every 250ms at most, from the writer thread between
  // transactions; StoreStats::database_shared). Two fenced sharing a server then commit batches
  // as large as one does, and one fenced alone never waits. 0 never waits.
  std::chrono::microseconds shared_linger{100};
  // Threads calling `verify`, and the most distinct (lock, token) verifications waiting for
  // one; a write needing one more is answered kTimeout at once.
  unsigned verify_threads = 4;
  std::size_t max_queued_verifications = 256;
};

// The request for one fenced write.
struct WriteRequest {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string lock;
  FencingToken token;
  std::string key;
  std::string value;  // ignored for kDelete
  // The identity of the lock service that granted `token` (Lease::service); empty when the
  // client sent none. A fence is bound to the service of its first token.
  std::string service;
  // Who asks (an authenticated principal's name), for the history; may be empty.
  std::string principal;
  // The write applies only when the key's version is this (kIfAbsent: only when the key is
  // absent); else kPreconditionFailed. nullopt: unconditional.
  IfVersion if_version;
};

// Several writes under one grant, applied in order in one transaction, all or none.
struct BatchRequest {
  std::string lock;
  FencingToken token;
  std::string service;    // as WriteRequest::service
  std::string principal;  // as WriteRequest::principal
  std::vector<ObjectWrite> writes;
};

// Counters since Open. Safe to read while writes run.
struct StoreStats {
  std::uint64_t accepted = 0;
  // Writes (a batch counts once) refused, by the code of their refusal: kStaleToken,
  // kWrongLock, kWrongService, kUnverifiedToken, kPreconditionFailed.
  std::array<std::uint64_t, kStatusCodeCount> refused_by_code{};
  std::uint64_t refused(StatusCode code) const {
    return refused_by_code[static_cast<std::size_t>(code)];
  }
  std::uint64_t refused_total() const {
    std::uint64_t sum = 0;
    for (auto n : refused_by_code) sum += n;
    return sum;
  }
  std::uint64_t verifications = 0;    // calls of StoreOptions::verify
  std::uint64_t verify_failures = 0;  // calls that could not ask the lock service
  std::uint64_t failed = 0;           // writes failed by a storage error (never acknowledged)
  std::uint64_t commits = 0;          // transactions committed
  // Times the store reopened and checked its database after a failed commit (SQLite).
  std::uint64_t recoveries = 0;
  // Batches run again after the database aborted them for a deadlock or a serialization failure
  // with another store's transaction (PostgreSQL; nothing of an aborted batch is kept or
  // acknowledged).
  std::uint64_t retries = 0;
  // Another store's writer was committing to the same database at the writer's last look
  // (StoreOptions::shared_linger); always false on SQLite.
  bool database_shared = false;
  // batch_size_buckets[i] = commits whose batch size was in (2^(i-1), 2^i]; the last bucket
  // also counts every larger batch.
  std::vector<std::uint64_t> batch_size_buckets;
};

// Thread safety: safe for concurrent use by any number of threads. Writes from all threads are
// funnelled to one writer thread that commits them in batches (group commit).
class FencedStore {
 public:
  using WriteCallback = std::function<void(Result<WriteReceipt>)>;
  using BatchCallback = std::function<void(Result<std::vector<WriteReceipt>>)>;
  // Most objects one List call returns.
  static constexpr std::size_t kMaxListLimit = 1000;

  // Opens or creates the database and migrates its schema forward. Fails with a clear message
  // when the file is not a fencekit store or was written by a newer version.
  static Result<std::unique_ptr<FencedStore>> Open(StoreOptions options);

  // Finishes every queued write, then closes the database.
  virtual ~FencedStore() = default;

  // Queues a write; `done` runs on the writer thread once the write is durably accepted, or
  // refused (kStaleToken with the highest token, kWrongLock with the bound lock: refusal.h,
  // kWrongService, kUnverifiedToken), or failed. Failures change nothing and are not recorded:
  // kInvalidArgument (a bad name or service id, or no service under require_service), kTimeout
  // (verification on advance could not ask the lock service, or too many verifications wait),
  // kIoError or kUnavailable (storage). `done` must not block: hand the result on.
  // kPreconditionFailed when request.if_version does not hold: nothing changes, and the
  // refusal is recorded like the others.
  virtual void Submit(WriteRequest request, WriteCallback done) = 0;
  // Queues a batch: its writes are decided in order, each seeing the ones before it, and
  // applied only if all are accepted; `done` gets one receipt per write, in order. Refusals
  // and failures are Submit's, for the whole batch: nothing of it is applied, and a refusal is
  // recorded once, as the write that refused it (its key in the message; in
  // RefusedKey() for kPreconditionFailed). kInvalidArgument also for an empty batch, or one
  // over max_batch_writes or max_batch_bytes.
  virtual void SubmitBatch(BatchRequest batch, BatchCallback done) = 0;

  // Blocking forms of Submit.
  Result<WriteReceipt> Write(WriteRequest request);
  Result<WriteReceipt> Put(std::string_view lock, FencingToken token, std::string_view key,
                           std::string_view value);
  Result<WriteReceipt> Delete(std::string_view lock, FencingToken token, std::string_view key);
  Result<std::vector<WriteReceipt>> WriteBatch(BatchRequest batch);

  // Reads are not fenced. kNotFound when absent.
  virtual Result<StoredObject> Get(std::string_view key) = 0;
  // Up to `limit` (1 to kMaxListLimit) keys starting with `prefix` and greater than `after`
  // (empty: from the first), in byte order, without their values. Unfenced like Get.
  // kInvalidArgument for a bad limit, or a prefix or cursor longer than max_key_bytes.
  virtual Result<ObjectPage> List(std::string_view prefix, std::string_view after,
                                  std::size_t limit) = 0;
  // The highest accepted token for `lock`, or nullopt when it never accepted a write.
  virtual Result<std::optional<FencingToken>> Highest(std::string_view lock) = 0;
  // The fence of `lock` with its service binding, or nullopt when it has none.
  virtual Result<std::optional<FenceState>> Fence(std::string_view lock) = 0;
  // StoreOptions::require_service: a write without a service is refused.
  virtual bool requires_service() const = 0;
  // Sets the fence of `lock` to `highest`, up or down (fence administration: recovers a fence
  // poisoned by a forged token, or one whose lock service lost its counter), creating it when
  // absent, and unbinds it from its lock service when `unbind_service`. Serialised with writes
  // on the writer thread. Recorded in the history as op "set_fence" with `principal` (seq 0 in
  // the result when the history is disabled). Returns that decision. kInvalidArgument for a
  // bad lock name; kIoError or kUnavailable when not stored.
  virtual Result<Decision> SetFence(std::string_view lock, FencingToken highest,
                                    std::string_view principal, bool unbind_service) = 0;
  // Up to `limit` most recent decisions, oldest first.
  virtual Result<std::vector<Decision>> History(std::size_t limit) = 0;
  // Whether a write could be committed now, without writing any data: on the writer thread,
  // serialised with writes, recovers from a failed commit as the next batch would (SQLite
  // reopens and checks the database, PostgreSQL connects again), then commits a transaction
  // that the database must make durable. Ok, or the status a write would fail with now
  // (kIoError, kUnavailable; kUnavailable once closed). Blocks until the writer has tried.
  virtual Status CheckWritable() = 0;
  virtual StoreStats Stats() const = 0;

  // Finishes queued writes and closes the database; later writes fail with kUnavailable.
  virtual Status Close() = 0;
};

// StoreOptions::path as it may be shown in messages and logs: a PostgreSQL URI loses its
// password.
std::string DescribeDatabase(std::string_view path);

}  // namespace fencekit
