// A SQLite VFS that wraps the real one and injects faults around real SQLite: I/O errors on
// demand, and a power loss modelled on a disk's write cache. Used to show that a failed commit
// acknowledges nothing and that an acknowledged write survives a power loss.
#pragma once

#include <atomic>
#include <cstdint>

namespace fencekit::testing {

struct FaultVfs {
  static constexpr const char* kName = "fencekit-fault";
  // Registers the VFS (once). Use StoreOptions::sqlite_vfs = kName, or `as_default` to have
  // every SQLite database of the process opened through it (the lock client's too).
  static void Register(bool as_default = false);
  // When set, every xSync fails with SQLITE_IOERR_FSYNC.
  static std::atomic<bool> fail_sync;
  // When set, every xWrite fails with SQLITE_FULL (a full disk).
  static std::atomic<bool> disk_full;
  // While set, every xShmLock (which each transaction of a WAL database takes) waits until it is
  // cleared: a database that stops answering.
  static std::atomic<bool> stall;

  // --- Power loss ---
  // From now on the VFS models a disk cache: what a file received since its last successful
  // xSync is only in the cache (the real fsync is skipped, so runs are fast), and a failed
  // xSync loses the cached pages for good, as Linux may (later writes to such a page start from
  // what the disk holds). Files opened before this call count as synced.
  static void StartPowerLossModel();
  // The k-th xWrite, xTruncate, xSync or xDelete call (1-based, counted from
  // StartPowerLossModel) "loses power": it and every later one fail with an I/O error, as if the
  // machine had stopped. 0: never.
  static void CrashAt(std::uint64_t k);
  static bool crashed();
  // Those calls since StartPowerLossModel.
  static std::uint64_t calls();

  enum class Loss {
    kDrop,  // every page not synced is lost
    kTorn,  // a seeded random subset of them is lost, and the last written sector is torn
  };
  // REQUIRES: every connection to the files is closed. Makes the files what the disk would
  // hold after the power loss: lost pages get their content back as of the last sync, the file
  // its synced size (kDrop), and each database's -shm file (memory, not disk) is deleted. Then
  // stops the model.
  static void LosePower(Loss loss, std::uint64_t seed);
};

}  // namespace fencekit::testing
