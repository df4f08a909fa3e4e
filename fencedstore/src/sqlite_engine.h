// The SQLite engine: a batch of writes decided statement by statement inside one BEGIN
// IMMEDIATE transaction on the writer's connection, made durable by its commit (one fsync in WAL
// mode). Private to fencedstore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"

namespace fencekit::fencedstore {

// Thread safety: as Engine.
class SqliteEngine final : public Engine {
 public:
  // Prepares the write statements on `db`. REQUIRES: `db` holds the current schema; `txn` was
  // prepared on it with TxnMode::kImmediate; `options` outlives the engine.
  static Result<std::unique_ptr<Engine>> Make(const StoreOptions& options, sqlite::Db db,
                                              sqlite::TxnStatements txn);

  Status CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms, Verifier* verifier) override;
  Result<Decision> SetFence(const AdminOp& op, std::int64_t now_ms) override;
  void Close() override;

 private:
  explicit SqliteEngine(const StoreOptions& options) : options_(options) {}

  // Decides `p` and applies it inside the open transaction; a storage error is returned (the
  // batch then fails), a decision is left in `p`.
  Status Apply(Pending& p, std::int64_t now_ms, Verifier* verifier, std::int64_t& last_seq);
  // Refuses `p` with `why`, recording it with the fence's highest token.
  Status Refuse(Pending& p, Refusal why, Status status, std::int64_t now_ms,
                std::int64_t& last_seq);
  // The fence of `lock`: false in `*exists` when it has none.
  Status ReadFence(const std::string& lock, bool* exists, std::int64_t* highest,
                   std::string* service);
  Status Record(const Pending& p, std::int64_t now_ms, std::int64_t& last_seq);

  const StoreOptions& options_;
  sqlite::Db db_;
  sqlite::TxnStatements txn_;
  sqlite::Stmt advance_fence_, read_fence_, insert_fence_, read_object_, upsert_object_,
      delete_object_, insert_history_, trim_history_, set_fence_;
};

}  // namespace fencekit::fencedstore
