// Transaction: one PostgreSQL transaction sent as one pipeline (BEGIN, the commands, COMMIT in
// one round trip), as sqlite::Transaction is for SQLite: nothing counts as committed unless
// Commit says so, and a transaction that fails is rolled back. Private to fencedstore.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "pg/connection.h"

namespace fencekit::fencedstore::pg {

// Thread safety: not safe for concurrent use; `conn` must outlive it.
class Transaction {
 public:
  Transaction(Conn& conn, std::chrono::milliseconds timeout) : conn_(conn), timeout_(timeout) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Queues a command; its result comes back at its place among the others.
  Transaction& Add(Command command);

  // What went wrong when Commit did not commit.
  struct Failure {
    Status status;
    // The connection was lost midway, or the server warned while committing (a commit that
    // stopped waiting for its synchronous standby is only local): the outcome is not known.
    bool maybe_committed = false;
    std::string sql_state;  // of the command that failed, "" when none did
  };

  // Sends BEGIN, the commands and COMMIT. On success, one result per added command, in order.
  // Otherwise the failure ("PostgreSQL refused <doing>: ...", or a lost connection or a
  // warning), after a ROLLBACK when a command failed and the connection still works. Call once.
  Result<std::vector<ResultPtr>> Commit(std::string_view doing, Failure* failure);

 private:
  Conn& conn_;
  const std::chrono::milliseconds timeout_;
  std::vector<Command> commands_{Command{"BEGIN"}};
};

}  // namespace fencekit::fencedstore::pg
