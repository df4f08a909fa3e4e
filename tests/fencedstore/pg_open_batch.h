// A batch of another fenced left open on the same PostgreSQL database, for the tests of what a
// store decides beside it (fencedstore_pg_test.cc, pg_batches_test.cc).
#pragma once

#include <string>

#include "fencekit/common/status.h"
#include "support/servers/pg_client.h"

namespace fencekit::testing {

// Begins a transaction on `other` in which another fenced's batch writes `key` = `value` under
// lock L at `token`: decided, its locks held, not committed. Its outcome.
inline Result<std::string> WriteInAnOpenTransaction(PgClient& other, int token,
                                                    const std::string& key,
                                                    const std::string& value) {
  return other.Value("BEGIN; SELECT o_outcome FROM fencekit.write(false, 'L'::bytea, " +
                     std::to_string(token) + ", '" + key + "'::bytea, '" + value +
                     "'::bytea, NULL, NULL, 0, NULL, false, false, 0, NULL, true)");
}

}  // namespace fencekit::testing
