// A SQLite VFS that wraps the real one and injects I/O faults on demand: fault injection
// around real SQLite, used to show that a failed commit acknowledges nothing.
#pragma once

#include <atomic>

namespace fencekit::testing {

struct FaultVfs {
  static constexpr const char* kName = "fencekit-fault";
  // Registers the VFS (once). Use StoreOptions::sqlite_vfs = kName.
  static void Register();
  // When set, every xSync fails with SQLITE_IOERR_FSYNC.
  static std::atomic<bool> fail_sync;
  // When set, every xWrite fails with SQLITE_FULL (a full disk).
  static std::atomic<bool> disk_full;
};

}  // namespace fencekit::testing
