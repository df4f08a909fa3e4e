// The SQLite engine: a batch of writes decided statement by statement inside one BEGIN
// IMMEDIATE transaction on the writer's connection, made durable by its commit (one fsync in WAL
// mode). After a failed commit (a failed fsync above all: the kernel may have dropped the pages
// it could not write, and a later fsync that succeeds proves nothing about them) nothing more
// is written on that connection: the next batch first reopens the database and checks it
// (PRAGMA quick_check), and fails unacknowledged until that succeeds. Private to fencedstore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sqlite/history_run.h"
#include "sqlite/passed_fences.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"
#include "store_engine.h"

namespace fencekit::fencedstore {

// Thread safety: as Engine.
class SqliteEngine final : public Engine {
 public:
  // Prepares the write statements on `db`. REQUIRES: `db` holds the current schema; `txn` was
  // prepared on it with TxnMode::kImmediate; `options` outlives the engine.
  static Result<std::unique_ptr<Engine>> Make(const StoreOptions& options, sqlite::Db db,
                                              sqlite::TxnStatements txn);

  Status CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms, Verifier* verifier,
                     const TakeNext& next) override;
  Result<Decision> SetFence(const AdminOp& op, std::int64_t now_ms) override;
  Status ProbeCommit() override;
  void Close() override;
  std::uint64_t recoveries() const override { return recoveries_; }

 private:
  explicit SqliteEngine(const StoreOptions& options) : options_(options) {}

  // Takes the connection and prepares the write statements on it.
  Status Prepare(sqlite::Db db, sqlite::TxnStatements txn);
  // After a failed commit: reopens the connection and checks the database.
  Status Recover();
  // Recover() when the last commit failed; the status a batch fails with when it cannot.
  Status RecoverIfSuspect();

  // Decides `p` (every write of a batch, in a savepoint when atomic) and applies it inside the
  // open transaction, recording the decision in the transaction's run (the last seq given in
  // `last_seq`); a storage error is returned (the group commit then fails), a decision is left
  // in `p`.
  Status Apply(Pending& p, Verifier* verifier, std::int64_t& last_seq);
  // Decides write `i` of `p` and applies it when accepted (its receipt in `*receipt`), without
  // recording it. A refusal or a deferral is left in `p`.
  Status Decide(Pending& p, std::size_t i, Verifier* verifier, WriteReceipt* receipt);
  // Leaves the refusal of `p` by its write `i` in `p`.
  Status Refuse(Pending& p, Status refusal);
  // The fence of `lock`: false in `*exists` when it has none.
  Status ReadFence(const std::string& lock, bool* exists, std::int64_t* highest,
                   std::string* service);
  // Records the decision on `w` in the transaction's run; its seq in `last_seq`.
  Status Record(const WriteRequest& w, bool accepted, std::int64_t highest, StatusCode why,
                std::int64_t& last_seq);
  // Adds a decision to the transaction's run (none without a history); its seq in `*seq`.
  Status AddToRun(std::string_view op, std::string_view lock, std::int64_t token,
                  std::string_view key, bool accepted, std::int64_t highest,
                  std::string_view reason, std::string_view principal, std::int64_t* seq);
  // Inserts the transaction's run, whose last decision has seq `last_seq`, if it has one.
  Status InsertRun(std::int64_t now_ms, std::int64_t last_seq);
  // Steps `stmt`, which returns no row.
  Status Run(sqlite::Stmt& stmt, std::string_view doing);
  // Decide's step 2: whether the fence lets write `i` of `p` through (`*through`), moving or
  // creating it; else the refusal or deferral is left in `p`.
  Status PassFence(Pending& p, std::size_t i, Verifier* verifier, std::string_view service,
                   bool verified, WriteReceipt* receipt, bool* through);

  const StoreOptions& options_;
  std::string suspect_;  // why the last commit failed; empty when it did not
  std::uint64_t recoveries_ = 0;
  sqlite::Db db_;
  sqlite::TxnStatements txn_;
  sqlite::Stmt advance_fence_, read_fence_, insert_fence_, read_object_, insert_object_,
      update_object_, rewrite_object_, delete_object_, insert_run_, read_last_seq_, trim_history_,
      trim_runs_, set_fence_, savepoint_, rollback_to_, release_, read_counter_, write_counter_,
      bump_probe_;
  // The store-wide version counter (fencekit/fencedstore/types.h): the last version given, read at the
  // start of each transaction and written back at its end when it moved.
  std::int64_t last_version_ = 0;
  // The decisions of the open transaction, inserted as one row before it commits; the seq
  // before its first.
  HistoryRun run_;
  std::int64_t run_start_ = 0;
  // History records made since the last trim (also in transactions rolled back since: the trim
  // then comes a little early).
  std::int64_t untrimmed_ = 0;
  // The fences this transaction let writes through, so that later writes at the same tokens
  // skip the fence's statement: cleared when a transaction begins and when a savepoint is
  // rolled back.
  PassedFences passed_;
};

}  // namespace fencekit::fencedstore
