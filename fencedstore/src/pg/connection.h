// One libpq connection with a deadline on every wait: the connection is non-blocking and every
// exchange polls its socket, so a stopped or unreachable server costs at most the timeout, never
// a hung thread. Commands go one by one (Exec) or together in one pipeline (Pipeline: one round
// trip for many statements). Private to fencedstore.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::fencedstore::pg {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// One statement of a pipeline: a prepared statement's name, or SQL with at most one statement.
// Parameters are text, or binary for bytea (`Bytes`); results come in binary format.
struct Command {
  std::string sql;        // SQL, or the name of a statement prepared with Prepare
  bool prepared = false;  // `sql` names a prepared statement
  std::vector<std::optional<std::string>> values;  // nullopt is NULL
  std::vector<int> formats;                        // 1: binary, 0: text

  Command& Text(std::string_view v);
  Command& Int(std::int64_t v);
  Command& Bool(bool v);
  Command& Bytes(std::string_view v);
  Command& Null();
  // One-dimensional arrays, sent in binary (nullopt elements are NULL): bytea[], text[] (UTF-8
  // elements), int8[], boolean[].
  Command& BytesArray(const std::vector<std::optional<std::string_view>>& v);
  Command& TextArray(const std::vector<std::optional<std::string_view>>& v);
  Command& IntArray(const std::vector<std::optional<std::int64_t>>& v);
  Command& BoolArray(const std::vector<bool>& v);
};

// Reading binary result columns.
std::int64_t GetInt(const PGresult* r, int row, int col);
bool GetBool(const PGresult* r, int row, int col);
std::string GetBytes(const PGresult* r, int row, int col);  // bytea or text; "" for NULL

// The SQLSTATE of a failed result ("" when none), and its message.
std::string SqlState(const PGresult* r);
std::string ErrorText(const PGresult* r);

// The URI without its password, to name the database in messages and logs.
std::string RedactUri(std::string_view uri);

// Thread safety: not safe for concurrent use.
class Conn {
 public:
  // Connects to `uri` (libpq's URI form, several hosts allowed); each host is tried for at most
  // connect_timeout (default 5 s; the URI may set it). kUnavailable with libpq's reason.
  static Result<std::unique_ptr<Conn>> Connect(const std::string& uri);
  ~Conn();

  // False once the connection is lost, or after an exchange that failed midway (the
  // connection's state is then unknown): make a new one.
  bool usable() const;

  // Runs `sql` (one or more statements, simple protocol, no parameters) and returns the last
  // result. A failed statement gives its error (kIoError with the SQLSTATE in the message).
  Result<ResultPtr> Exec(const std::string& sql, std::chrono::milliseconds timeout);
  // Prepares `sql` under `name`.
  Status Prepare(const std::string& name, const std::string& sql,
                 std::chrono::milliseconds timeout);
  // Sends every command in one pipeline, then waits for all their results: one per command, in
  // order; the commands after a failed one get PGRES_PIPELINE_ABORTED. kUnavailable when the
  // connection is lost or `timeout` passes (the connection is then unusable).
  Result<std::vector<ResultPtr>> Pipeline(const std::vector<Command>& commands,
                                          std::chrono::milliseconds timeout);
  // Pipeline in two halves, so that more pipelines may be sent before the results of the first
  // are read: Send queues `commands` and a sync point behind the pipelines in flight and returns
  // without waiting; Receive reads the results of the oldest pipeline in flight (`count`, its
  // number of commands) by `deadline`. When every result but the last has come back and none
  // failed, Receive calls `before_last` (which may Send the next pipeline) before waiting for
  // the last. Exec and Prepare fail while a pipeline is in flight. `flush_before_last`: the
  // server sends the results before the last command's as soon as they are made, not with it
  // (a server buffers a pipeline's results until its sync point otherwise).
  Status Send(const std::vector<Command>& commands, bool flush_before_last = false);
  Result<std::vector<ResultPtr>> Receive(std::size_t count,
                                         std::chrono::steady_clock::time_point deadline,
                                         const std::function<void()>& before_last = {});
  // Pipelines sent and not yet received.
  int in_flight() const { return in_flight_; }
  // Whether the server sent a WARNING since the last call (e.g. a commit that stopped waiting
  // for its synchronous standby), then forgets it.
  bool TakeWarning();

 private:
  explicit Conn(PGconn* c);
  // Sends what is buffered and reads until `done` is true, within `deadline`.
  template <typename Done>
  Status Wait(Done done, std::chrono::steady_clock::time_point deadline);
  Status Lost(std::string_view doing);

  PGconn* conn_;
  bool broken_ = false;
  bool warned_ = false;
  int in_flight_ = 0;
};

}  // namespace fencekit::fencedstore::pg
