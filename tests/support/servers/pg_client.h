// A libpq connection for tests that look into a PostgreSQL database directly (what fenced
// stored there, replication state), with plain SQL and every value as text.
#pragma once

#include <libpq-fe.h>

#include <string>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::testing {

using PgRows = std::vector<std::vector<std::string>>;

// One connection, opened by the constructor (libpq's connect_timeout bounds it; add
// "?connect_timeout=N" to the URI to change libpq's default of none).
// Thread safety: not safe for concurrent use.
class PgClient {
 public:
  explicit PgClient(const std::string& uri);
  ~PgClient();
  PgClient(const PgClient&) = delete;
  PgClient& operator=(const PgClient&) = delete;

  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  std::string error() const { return PQerrorMessage(conn_); }

  // Runs `sql` (one or more statements): the rows of the last result, each value as text (""
  // for NULL). kUnavailable with the SQLSTATE and the server's message on an error.
  Result<PgRows> Query(const std::string& sql);
  // Query() for one value: the first column of the first row, kNotFound without a row.
  Result<std::string> Value(const std::string& sql);

 private:
  PGconn* conn_;
};

}  // namespace fencekit::testing
