// The store's schema: the fences, objects and history tables, versioned by PRAGMA user_version
// and migrated forward on open. Private to fencedstore.
#pragma once

#include <sqlite3.h>

#include <string>

#include "fencekit/common/status.h"
#include "sqlite/transaction.h"

namespace fencekit::fencedstore {

// Switches `db` to WAL mode, then, in one transaction, checks that the file is a fencekit store
// (or empty) and migrates its schema to the current version. `path` names the file in errors:
// kIoError when WAL is not possible, kInvalidArgument for another SQLite database or a store
// written by a newer fencekit. REQUIRES: no transaction is open on `db`.
Status Migrate(sqlite3* db, sqlite::TxnStatements& txn_stmts, const std::string& path);

}  // namespace fencekit::fencedstore
