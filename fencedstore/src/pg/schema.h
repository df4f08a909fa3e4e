// The PostgreSQL store's schema: tables fences, objects and history in the schema `fencekit`,
// versioned in fencekit.schema_version and migrated forward on open, then the functions of
// functions.h made at their latest version. Private to fencedstore.
#pragma once

#include <chrono>
#include <string>

#include "fencekit/common/status.h"
#include "pg/connection.h"

namespace fencekit::fencedstore::pg {

// In one transaction, under an advisory lock (so that several fenced starting at once migrate
// once): checks that the schema `fencekit` is a fencekit store's (or absent) and migrates it to
// the current version. `name` names the database in errors: kInvalidArgument for a schema
// `fencekit` of something else or a store written by a newer fencekit.
Status Migrate(Conn& conn, const std::string& name, std::chrono::milliseconds timeout);

}  // namespace fencekit::fencedstore::pg
