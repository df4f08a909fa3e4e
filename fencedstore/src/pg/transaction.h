// Transaction: one PostgreSQL transaction sent as one pipeline (BEGIN, the commands, COMMIT in
// one round trip), as sqlite::Transaction is for SQLite: nothing counts as committed unless
// Commit says so, and a transaction that fails is rolled back. Private to fencedstore.
#pragma once

#include <chrono>
#include <functional>
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

  // Commit in two halves, so that the next transaction can be on its way to the server while
  // this one commits: Send sends BEGIN, the commands and COMMIT behind the transactions in
  // flight on the connection and returns at once; Finish reads their results as Commit does.
  // Once every command has succeeded and only the COMMIT's result is awaited, Finish calls
  // `before_commit`, which may Send the next transaction; `early` asks the server to send the
  // commands' results before it commits, for that. Call Send, then Finish, once each, finishing
  // transactions in the order they were sent.
  void Send(bool early = false);
  Result<std::vector<ResultPtr>> Finish(std::string_view doing, Failure* failure,
                                        const std::function<void()>& before_commit = {});

 private:
  Conn& conn_;
  const std::chrono::milliseconds timeout_;
  std::vector<Command> commands_{Command{"BEGIN"}};
  std::chrono::steady_clock::time_point deadline_{};
  Status sent_ = Status::Ok();
};

}  // namespace fencekit::fencedstore::pg
