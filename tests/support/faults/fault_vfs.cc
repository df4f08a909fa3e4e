#include "fault_vfs.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "fencekit/common/mutex.h"
#include "sqlite/forwarding_file.h"

namespace fencekit::testing {

std::atomic<bool> FaultVfs::fail_sync{false};
std::atomic<bool> FaultVfs::disk_full{false};
std::atomic<bool> FaultVfs::stall{false};

namespace {

sqlite3_vfs* real_vfs = nullptr;
sqlite3_vfs fault_vfs;

// The power-loss model of one file: what its disk holds where it differs from the file.
struct DiskState {
  static constexpr std::int64_t kPage = 4096, kSector = 512;
  std::int64_t synced_size = -1;  // -1: not written since the model started
  // Pages written since the last sync: their content on the disk (zeros past its end).
  std::map<std::int64_t, std::string> unsynced;
  // Pages whose cached content a failed sync lost: their content on the disk.
  std::map<std::int64_t, std::string> lost;
  std::int64_t last_write_end = 0;
};

Mutex model_mu;
std::map<std::string, DiskState> disks FENCEKIT_GUARDED_BY(model_mu);  // by file name
std::atomic<bool> modelling{false};
std::atomic<bool> power_lost{false};
std::atomic<std::uint64_t> io_calls{0};
std::atomic<std::uint64_t> crash_at{0};

struct FaultFile {
  sqlite::ForwardingFile forwarding;  // the real file just past this struct
  DiskState* disk;                    // null for a file without a name
};

sqlite3_file* Real(sqlite3_file* f) { return sqlite::Inner(f); }

// Counts a write or sync call of the power-loss model; false once the power is lost.
bool PowerOn() {
  if (!modelling.load()) return true;
  std::uint64_t call = ++io_calls;
  std::uint64_t at = crash_at.load();
  if (at != 0 && call >= at) power_lost = true;
  return !power_lost.load();
}

std::string ReadPage(sqlite3_file* real, std::int64_t page) {
  std::string content(DiskState::kPage, '\0');
  // A short read zero-fills the rest, as the disk past the file's end.
  (void)real->pMethods->xRead(real, content.data(), static_cast<int>(content.size()),
                              page * DiskState::kPage);
  return content;
}

// Before `real` changes in [from, to): remembers what the disk holds there.
void BeforeChange(sqlite3_file* f, std::int64_t from, std::int64_t to) {
  DiskState* disk = reinterpret_cast<FaultFile*>(f)->disk;
  if (!modelling.load() || disk == nullptr || to <= from) return;
  MutexLock lock(model_mu);
  if (disk->synced_size < 0) {
    sqlite3_int64 size = 0;
    Real(f)->pMethods->xFileSize(Real(f), &size);
    disk->synced_size = size;
  }
  for (std::int64_t page = from / DiskState::kPage; page <= (to - 1) / DiskState::kPage; ++page) {
    if (disk->unsynced.count(page) != 0) continue;
    auto lost = disk->lost.find(page);
    if (lost != disk->lost.end()) {
      // The cache dropped this page: a write starts from what the disk holds.
      Real(f)->pMethods->xWrite(Real(f), lost->second.data(), DiskState::kPage,
                                page * DiskState::kPage);
      disk->unsynced[page] = std::move(lost->second);
      disk->lost.erase(lost);
    } else {
      disk->unsynced[page] = ReadPage(Real(f), page);
    }
  }
  disk->last_write_end = to;
}

int Write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  if (!PowerOn()) return SQLITE_IOERR_WRITE;
  if (FaultVfs::disk_full.load()) return SQLITE_FULL;
  BeforeChange(f, off, off + n);
  return Real(f)->pMethods->xWrite(Real(f), p, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (!PowerOn()) return SQLITE_IOERR_TRUNCATE;
  sqlite3_int64 now = 0;
  Real(f)->pMethods->xFileSize(Real(f), &now);
  BeforeChange(f, size, now);
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  if (!PowerOn()) return SQLITE_IOERR_FSYNC;
  DiskState* disk = reinterpret_cast<FaultFile*>(f)->disk;
  if (FaultVfs::fail_sync.load()) {
    if (modelling.load() && disk != nullptr) {
      MutexLock lock(model_mu);
      disk->lost.merge(disk->unsynced);
      disk->unsynced.clear();
    }
    return SQLITE_IOERR_FSYNC;
  }
  if (!modelling.load()) return Real(f)->pMethods->xSync(Real(f), flags);
  if (disk != nullptr) {
    MutexLock lock(model_mu);
    disk->unsynced.clear();
    sqlite3_int64 size = 0;
    Real(f)->pMethods->xFileSize(Real(f), &size);
    disk->synced_size = size;
  }
  return SQLITE_OK;
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  // Only taking a lock waits: releasing one never does.
  while ((flags & SQLITE_SHM_LOCK) != 0 && FaultVfs::stall.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}

// The calls of the power-loss model and of the faults; the others go to the real file.
const sqlite3_io_methods kMethods = [] {
  sqlite3_io_methods m{};
  m.xWrite = Write;
  m.xTruncate = Truncate;
  m.xSync = Sync;
  m.xShmLock = ShmLock;
  return sqlite::ForwardingMethods(m);
}();

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  auto* ff = reinterpret_cast<FaultFile*>(f);
  ff->forwarding.inner = reinterpret_cast<sqlite3_file*>(ff + 1);
  int rc = real_vfs->xOpen(real_vfs, name, ff->forwarding.inner, flags, out_flags);
  ff->forwarding.base.pMethods = ff->forwarding.inner->pMethods != nullptr ? &kMethods : nullptr;
  ff->disk = nullptr;
  if (name != nullptr) {
    MutexLock lock(model_mu);
    ff->disk = &disks[name];  // std::map nodes stay put
  }
  return rc;
}

int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  if (!PowerOn()) return SQLITE_IOERR_DELETE;
  return real_vfs->xDelete(real_vfs, name, sync_dir);
}

// Writes `content` at `offset` of the closed file `path`.
void Restore(int fd, std::int64_t offset, const char* content, std::int64_t n) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, content, static_cast<std::size_t>(n), offset);
    if (w <= 0) return;
    content += w;
    offset += w;
    n -= w;
  }
}

}  // namespace

void FaultVfs::Register(bool as_default) {
  static std::once_flag once;
  std::call_once(once, [] {
    real_vfs = sqlite3_vfs_find(nullptr);
    fault_vfs = *real_vfs;
    fault_vfs.zName = kName;
    fault_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + real_vfs->szOsFile;
    fault_vfs.xOpen = Open;
    fault_vfs.xDelete = Delete;
    sqlite3_vfs_register(&fault_vfs, /*makeDflt=*/0);
  });
  if (as_default) sqlite3_vfs_register(&fault_vfs, /*makeDflt=*/1);
}

void FaultVfs::StartPowerLossModel() {
  MutexLock lock(model_mu);
  for (auto& [name, disk] : disks) disk = DiskState();
  io_calls = 0;
  crash_at = 0;
  power_lost = false;
  modelling = true;
}

void FaultVfs::CrashAt(std::uint64_t k) { crash_at = k; }
bool FaultVfs::crashed() { return power_lost.load(); }
std::uint64_t FaultVfs::calls() { return io_calls.load(); }

void FaultVfs::LosePower(Loss loss, std::uint64_t seed) {
  MutexLock lock(model_mu);
  std::mt19937_64 rng(seed);
  for (auto& [name, disk] : disks) {
    if (disk.synced_size >= 0) {
      int fd = ::open(name.c_str(), O_RDWR);
      if (fd >= 0) {
        for (const auto& [page, content] : disk.lost) {
          Restore(fd, page * DiskState::kPage, content.data(), DiskState::kPage);
        }
        bool kept_beyond = false;
        for (const auto& [page, content] : disk.unsynced) {
          if (loss == Loss::kTorn && rng() % 2 == 0) {
            kept_beyond = kept_beyond || (page + 1) * DiskState::kPage > disk.synced_size;
            continue;
          }
          Restore(fd, page * DiskState::kPage, content.data(), DiskState::kPage);
        }
        if (loss == Loss::kTorn && disk.last_write_end > 0) {
          // The last written sector reached the disk only in part: its second half is old.
          std::int64_t sector = (disk.last_write_end - 1) / DiskState::kSector * DiskState::kSector;
          auto page = disk.unsynced.find(sector / DiskState::kPage);
          if (page != disk.unsynced.end()) {
            std::int64_t at = sector + DiskState::kSector / 2;
            Restore(fd, at, page->second.data() + at % DiskState::kPage, DiskState::kSector / 2);
          }
        }
        if (loss == Loss::kDrop || !kept_beyond) {
          if (::ftruncate(fd, disk.synced_size) != 0) {
            // Left longer: the tail is zeros or old pages, which SQLite ignores.
          }
        }
        ::close(fd);
      }
    }
    ::unlink((name + "-shm").c_str());
  }
  for (auto& [name, disk] : disks) disk = DiskState();  // open files may point at them
  modelling = false;
  power_lost = false;
  crash_at = 0;
}

}  // namespace fencekit::testing
