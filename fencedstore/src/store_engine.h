// The storage side of the store, for one kind of database (sqlite_*.h, pg_*.h): how a batch of
// writes is decided and made durable in one transaction (Engine), and how reads are answered
// (Reads). The writer (writer.h) owns the queue, the thread, the batches and verification; an
// engine owns the writer's connection. Private to fencedstore.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/types.h"
#include "fencekit/fencedstore/store.h"
#include "verifier.h"

namespace fencekit::fencedstore {

enum class Outcome { kAccepted, kRefused, kFailed, kDeferred };
// One write, or one client batch, on its way through the writer, and the decision an engine
// leaves in it. The writes of a batch share their lock, token, service and principal and are
// decided together: all accepted or none (`culprit` names the write that refused them).
struct Pending {
  std::vector<WriteRequest> writes;  // at least one
  // The caller's answer: `done` for a client batch, `done_one` for a single write (Submit),
  // called by Answer. One of them is set.
  FencedStore::BatchCallback done;
  FencedStore::WriteCallback done_one;
  // Per write: lock_for's lock for its key (the longest matching prefix), or null; empty
  // without lock_for. Set by Submit; read through prefix_lock.
  std::vector<const std::string*> prefix_locks;
  // The lock service's answer on (lock, token), once asked; `resumed` when it came back from
  // a flight of the verifier (which is told once the write is processed).
  SharedVerdict verdict;
  bool resumed = false;
  // Set by the engine: one receipt per write when accepted; else the refusal or failure.
  Result<std::vector<WriteReceipt>> result = Status::Internal("write not processed");
  Outcome outcome = Outcome::kFailed;
  std::int64_t highest = 0;
  // A refused write's `result` is its refusal: its code names the reason (StatusCodeName), in
  // the history, the metrics and fenced's answer alike.
  std::size_t culprit = 0;

  // The grant every write names.
  const WriteRequest& grant() const { return writes.front(); }
  // lock_for's lock for write `i`'s key, or null.
  const std::string* prefix_lock(std::size_t i) const {
    return prefix_locks.empty() ? nullptr : prefix_locks[i];
  }
  // Hands `r` to the caller (a single write gets its one receipt).
  void Answer(Result<std::vector<WriteReceipt>> r) {
    if (!done_one) return done(std::move(r));
    if (!r.ok()) return done_one(r.status());
    done_one(std::move(r->front()));
  }
  // Decided on its own (one write, no precondition) or in a savepoint of its own.
  bool atomic() const { return writes.size() > 1 || writes.front().if_version.has_value(); }
};

// A fence administration (FencedStore::SetFence).
struct AdminOp {
  std::string lock;
  FencingToken highest;
  std::string principal;
  bool unbind = false;
  std::function<void(Result<Decision>)> done;
};

// Thread safety: used by the writer thread only (and by Start/Stop when it is not running).
class Engine {
 public:
  virtual ~Engine() = default;

  // The batch to send behind the one committing, or null when none is queued; sets its time.
  using TakeNext = std::function<std::vector<Pending>*(std::int64_t* now_ms)>;

  // Decides every write of `batch` and applies the accepted ones in one transaction, with one
  // record per decision in the history; returns once that transaction is durable. A write the
  // engine cannot decide before the lock service answers is left kDeferred, unrecorded and
  // unchanged (`verifier` may hold the answer already; null without verification). On a storage
  // error nothing of the batch may be acknowledged: returns the status every write of the batch
  // fails with, worded for the client (and saying whether the batch may have been stored).
  // An engine may call `next` (once at most, if set) once the batch is decided and only its
  // commit is awaited, and send the batch it returns behind this one (PostgreSQL), so that the
  // database need not wait for it. REQUIRES: that batch is the next one given to CommitBatch,
  // with no other call between.
  virtual Status CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms, Verifier* verifier,
                             const TakeNext& next) = 0;
  // As FencedStore::SetFence, in a transaction of its own.
  virtual Result<Decision> SetFence(const AdminOp& op, std::int64_t now_ms) = 0;
  // As FencedStore::CheckWritable: recovers as CommitBatch would, then commits a transaction
  // that changes no data but must be made durable (so a failing fsync fails it).
  virtual Status ProbeCommit() = 0;
  // Releases the connection; the last call.
  virtual void Close() = 0;
  // Times the engine reopened and checked its database after a failed commit. Read on the
  // writer thread only.
  virtual std::uint64_t recoveries() const { return 0; }
  // Batches run again after the database aborted them for a deadlock or a serialization failure
  // with another writer's transaction (PostgreSQL). Read on the writer thread only.
  virtual std::uint64_t retries() const { return 0; }
  // Whether another store's writer committed to the same database within the last 500ms
  // (StoreOptions::shared_linger). Costs a round trip where it is not always false.
  virtual Result<bool> AnotherWriterActive() { return false; }
};

// The keys a listing scans, in byte order: from `from` (itself included when `inclusive`) up to
// `to`, excluded; without `to`, to the last key.
struct KeyRange {
  std::string from;
  bool inclusive = true;
  std::optional<std::string> to;
};
// The keys starting with `prefix` and greater than `after`.
KeyRange ListRange(std::string_view prefix, std::string_view after);

// The store's reads. Names are checked by the caller. Thread safety: safe for concurrent use.
class Reads {
 public:
  virtual ~Reads() = default;
  virtual Result<StoredObject> Get(std::string_view key) = 0;
  // Up to `limit` objects of `range` in byte order of their keys, `next` set when there are more.
  virtual Result<ObjectPage> List(const KeyRange& range, std::size_t limit) = 0;
  virtual Result<std::optional<FenceState>> Fence(std::string_view lock) = 0;
  virtual Result<std::vector<Decision>> History(std::size_t limit) = 0;
  // Later reads fail with kUnavailable.
  virtual void Close() = 0;
};

// The engine and the reads of one database.
struct Storage {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Reads> reads;
};

// Whether StoreOptions::path names a PostgreSQL database ("postgresql://" or "postgres://").
bool IsPostgresUri(std::string_view path);
// Open options.path, creating or migrating its schema. REQUIRES: `options` outlives the result.
Result<Storage> OpenSqliteStorage(const StoreOptions& options);    // sqlite_connection.cc
Result<Storage> OpenPostgresStorage(const StoreOptions& options);  // pg_storage.cc

}  // namespace fencekit::fencedstore
