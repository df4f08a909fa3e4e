// The PL/pgSQL functions the PostgreSQL engine calls (fencekit.write, fencekit.write_many,
// fencekit.write_batch and their helper), as the SQL that makes them at their latest version:
// the store's rules on PostgreSQL. Run by Migrate (schema.h) after migrating, on every open.
// Private to fencedstore.
#pragma once

namespace fencekit::fencedstore::pg {

// CREATE OR REPLACE statements, several in one string.
extern const char* const kWriteFunctions;

}  // namespace fencekit::fencedstore::pg
