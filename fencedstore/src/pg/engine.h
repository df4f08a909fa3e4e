// The PostgreSQL engine: a batch of writes sent as one pipeline (BEGIN, one call of
// fencekit.write_many for the batch's unconditional writes, one of fencekit.write_batch per
// client batch or conditional write, COMMIT), so that a batch costs one round trip and one commit
// however many writes it holds; the next batch goes out behind the COMMIT once the batch's
// decisions are back (CommitBatch's `next`), so the server need not wait for it. The connection is
// remade after it is lost (libpq picks a read-write host of the URI's list), so fenced rides out
// a failover. Private to fencedstore.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pg/connection.h"
#include "pg/transaction.h"
#include "store_engine.h"

namespace fencekit::fencedstore {

// Thread safety: as Engine.
class PostgresEngine final : public Engine {
 public:
  // REQUIRES: `options` outlives the engine; the schema is current. `conn` may be null (the
  // first batch connects).
  PostgresEngine(const StoreOptions& options, std::unique_ptr<pg::Conn> conn);

  Status CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms, Verifier* verifier,
                     const TakeNext& next) override;
  Result<Decision> SetFence(const AdminOp& op, std::int64_t now_ms) override;
  Status ProbeCommit() override;
  void Close() override;
  std::uint64_t retries() const override { return retries_; }
  // Another writer: a session holding the shared advisory lock every writer's connection takes
  // (Configure) in this database, whose last statement began within the last 500ms.
  Result<bool> AnotherWriterActive() override;

  // Makes a connection ready for the engine: the session's durability, prepared statements.
  // kInvalidArgument when the server cannot keep StoreOptions::durability's promise (fsync off).
  static Status Configure(pg::Conn& conn, const StoreOptions& options);

 private:
  // A usable connection, remade when lost.
  Status Connected();
  // A batch's transaction, built and sent, and where each write's decision is in its results
  // (batch[order[j]]'s: its command's, and its row there).
  struct Sent {
    const Pending* first = nullptr;  // the batch's data(), to know it again
    std::vector<std::size_t> order;
    std::vector<std::pair<std::size_t, int>> result_of;
    std::unique_ptr<pg::Transaction> txn;
  };
  // The batch's transaction on conn_, not yet sent.
  Sent Build(const std::vector<Pending>& batch, std::int64_t now_ms);
  // One attempt at the batch; `retry` is set when PostgreSQL aborted it for a deadlock or a
  // serialization failure (nothing was stored; it may simply run again). `next` as CommitBatch.
  Status Attempt(std::vector<Pending>& batch, std::int64_t now_ms, const TakeNext& next,
                 bool* retry);
  // Reads the results of `sent` (sent on conn_, the oldest in flight) into `batch`, as Attempt.
  Status Finish(std::vector<Pending>& batch, Sent& sent, const TakeNext& next, bool* retry);

  // The unconditional writes (not Pending::atomic) of a run of the batch, as the arguments of
  // one call of fencekit.write_many. The views point into the batch's writes.
  struct WriteMany {
    std::vector<bool> deletes, lock_fences;
    std::vector<std::optional<std::string_view>> locks, keys, values, services, prefix_locks,
        refusals, principals;
    std::vector<std::optional<std::int64_t>> tokens, verifies;

    std::size_t size() const { return keys.size(); }
    // The call, leaving the run empty.
    pg::Command Take(const StoreOptions& options, std::int64_t now_ms);
  };
  // Adds unconditional `p` to `many`; `lock_fence`: its fence is locked exclusively first.
  void AddWrite(WriteMany& many, const Pending& p, bool lock_fence) const;
  // The command deciding atomic `p` (Pending::atomic): fencekit.write_batch.
  pg::Command WriteCommand(const Pending& p, std::int64_t now_ms) const;
  // The p_verify argument of `p`'s command (0: verification off).
  int VerifyCode(const Pending& p) const;
  // True when the writes batch[order[first..last)] (all of one lock) could lock its fence in
  // different modes: some shared (a write that leaves the fence as it is), some exclusively
  // (one that moves, binds or confirms it).
  bool MixedFenceModes(const std::vector<Pending>& batch, const std::vector<std::size_t>& order,
                       std::size_t first, std::size_t last) const;
  // Leaves in `p` the decision its command returned (row `row` of fencekit.write_many's
  // result; fencekit.write_batch's whole result); an error for a result of another shape.
  Status ReadDecision(Pending& p, const PGresult* r, int row) const;

  const StoreOptions& options_;
  std::unique_ptr<pg::Conn> conn_;
  // The next batch, sent behind a commit (CommitBatch's `next`) and finished by the next call.
  std::optional<Sent> sent_;
  std::uint64_t commits_ = 0;
  std::uint64_t retries_ = 0;
};

}  // namespace fencekit::fencedstore
