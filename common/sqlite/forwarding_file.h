// The part of a SQLite VFS shim that only passes calls on: an sqlite3_file that wraps the
// base VFS's file, which lives just past it (the shim's szOsFile adds the base's), and io
// methods that forward every call the shim does not override.
#pragma once

#include <sqlite3.h>

namespace fencekit::sqlite {

// The first member of a shim's file. Thread safety: as the wrapped file.
struct ForwardingFile {
  sqlite3_file base;    // pMethods: the shim's methods
  sqlite3_file* inner;  // the base VFS's file, just past the shim's file
};

// The base VFS's file wrapped by `f`, a shim's file that starts with a ForwardingFile.
inline sqlite3_file* Inner(sqlite3_file* f) { return reinterpret_cast<ForwardingFile*>(f)->inner; }

// Version 3 io methods: those set in `overrides`, and for every other one a function that calls
// the inner file's.
sqlite3_io_methods ForwardingMethods(const sqlite3_io_methods& overrides);

}  // namespace fencekit::sqlite
