#include "sqlite/wal_write_batching.h"

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>

#include "fencekit/common/mutex.h"

namespace fencekit::fencedstore {

namespace {

// What a WAL file was handed and has not yet written: bytes from `start`, one run.
struct Pending {
  std::string bytes;
  sqlite3_int64 start = 0;
};
// Past this a run is written at once, so a large transaction's frames never all wait in memory.
// Below 128 KiB: SQLite's unix VFS writes at most 128 KiB - 1 bytes per call, and takes a longer
// write's shortfall for a full disk.
constexpr std::size_t kMaxPending = std::size_t{64} << 10;

// A WAL file: the real file just past this struct. Files that are not a WAL are opened in place
// with the real VFS's methods and never reach the functions below.
struct WalFile {
  sqlite3_file base;
  sqlite3_file* real;
  Pending* pending;
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<WalFile*>(f)->real; }

// Writes the held run, if any; SQLITE_OK or the real write's error (the run is dropped either
// way: SQLite rolls back a transaction whose write failed).
int Flush(sqlite3_file* f) {
  Pending* p = reinterpret_cast<WalFile*>(f)->pending;
  if (p->bytes.empty()) return SQLITE_OK;
  sqlite3_file* real = Real(f);
  int rc =
      real->pMethods->xWrite(real, p->bytes.data(), static_cast<int>(p->bytes.size()), p->start);
  p->bytes.clear();
  return rc;
}

int Close(sqlite3_file* f) {
  int flushed = Flush(f);
  auto* w = reinterpret_cast<WalFile*>(f);
  delete w->pending;
  w->pending = nullptr;
  int rc = w->real->pMethods != nullptr ? w->real->pMethods->xClose(w->real) : SQLITE_OK;
  return flushed != SQLITE_OK ? flushed : rc;
}
int Read(sqlite3_file* f, void* out, int n, sqlite3_int64 off) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xRead(Real(f), out, n, off);
}
int Write(sqlite3_file* f, const void* data, int n, sqlite3_int64 off) {
  Pending* p = reinterpret_cast<WalFile*>(f)->pending;
  if (!p->bytes.empty() && (off != p->start + static_cast<sqlite3_int64>(p->bytes.size()) ||
                            p->bytes.size() + static_cast<std::size_t>(n) > kMaxPending)) {
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  }
  if (p->bytes.empty()) p->start = off;
  p->bytes.append(static_cast<const char*>(data), static_cast<std::size_t>(n));
  return SQLITE_OK;
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xSync(Real(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int l) { return Real(f)->pMethods->xLock(Real(f), l); }
int Unlock(sqlite3_file* f, int l) { return Real(f)->pMethods->xUnlock(Real(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return Real(f)->pMethods->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return Real(f)->pMethods->xFetch(Real(f), off, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

const sqlite3_io_methods kWalMethods = {3,
                                        Close,
                                        Read,
                                        Write,
                                        Truncate,
                                        Sync,
                                        FileSize,
                                        Lock,
                                        Unlock,
                                        CheckReservedLock,
                                        FileControl,
                                        SectorSize,
                                        DeviceCharacteristics,
                                        ShmMap,
                                        ShmLock,
                                        ShmBarrier,
                                        ShmUnmap,
                                        Fetch,
                                        Unfetch};

sqlite3_vfs* Base(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

int Open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  sqlite3_vfs* base = Base(vfs);
  if ((flags & SQLITE_OPEN_WAL) == 0) return base->xOpen(base, name, f, flags, out_flags);
  auto* w = reinterpret_cast<WalFile*>(f);
  w->base.pMethods = nullptr;
  w->real = reinterpret_cast<sqlite3_file*>(w + 1);
  w->pending = new (std::nothrow) Pending;
  if (w->pending == nullptr) return SQLITE_NOMEM;
  int rc = base->xOpen(base, name, w->real, flags, out_flags);
  if (rc != SQLITE_OK || w->real->pMethods == nullptr) {
    delete w->pending;
    w->pending = nullptr;
    return rc;
  }
  w->base.pMethods = &kWalMethods;
  return SQLITE_OK;
}

// The VFS's other methods are the base's, called with the base.
int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  return Base(vfs)->xDelete(Base(vfs), name, sync_dir);
}
int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return Base(vfs)->xAccess(Base(vfs), name, flags, out);
}
int FullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return Base(vfs)->xFullPathname(Base(vfs), name, n, out);
}
void* DlOpen(sqlite3_vfs* vfs, const char* name) { return Base(vfs)->xDlOpen(Base(vfs), name); }
void DlError(sqlite3_vfs* vfs, int n, char* out) { Base(vfs)->xDlError(Base(vfs), n, out); }
void (*DlSym(sqlite3_vfs* vfs, void* lib, const char* sym))(void) {
  return Base(vfs)->xDlSym(Base(vfs), lib, sym);
}
void DlClose(sqlite3_vfs* vfs, void* lib) { Base(vfs)->xDlClose(Base(vfs), lib); }
int Randomness(sqlite3_vfs* vfs, int n, char* out) {
  return Base(vfs)->xRandomness(Base(vfs), n, out);
}
int Sleep(sqlite3_vfs* vfs, int us) { return Base(vfs)->xSleep(Base(vfs), us); }
int CurrentTime(sqlite3_vfs* vfs, double* out) { return Base(vfs)->xCurrentTime(Base(vfs), out); }
int GetLastError(sqlite3_vfs* vfs, int n, char* out) {
  return Base(vfs)->xGetLastError(Base(vfs), n, out);
}
int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return Base(vfs)->xCurrentTimeInt64(Base(vfs), out);
}

struct Registered {
  std::string name;
  sqlite3_vfs vfs;
};

}  // namespace

Result<std::string> WalWriteBatchingVfs(const std::string& base_name) {
  static Mutex mu;
  // By base name; registered VFSes are never unregistered, so they stay put.
  static std::map<std::string, std::unique_ptr<Registered>>& registered =
      *new std::map<std::string, std::unique_ptr<Registered>>();
  MutexLock lock(mu);
  auto it = registered.find(base_name);
  if (it != registered.end()) return it->second->name;
  sqlite3_vfs* base = sqlite3_vfs_find(base_name.empty() ? nullptr : base_name.c_str());
  if (base == nullptr) {
    return Status::InvalidArgument("no SQLite VFS is registered as \"" + base_name + "\"");
  }
  auto r = std::make_unique<Registered>();
  r->name = std::string("fencekit-wal-batching:") + base->zName;
  sqlite3_vfs& v = r->vfs;
  std::memset(&v, 0, sizeof v);
  v.iVersion = 2;
  v.szOsFile = static_cast<int>(sizeof(WalFile)) + base->szOsFile;
  v.mxPathname = base->mxPathname;
  v.zName = r->name.c_str();
  v.pAppData = base;
  v.xOpen = Open;
  v.xDelete = Delete;
  v.xAccess = Access;
  v.xFullPathname = FullPathname;
  v.xDlOpen = DlOpen;
  v.xDlError = DlError;
  v.xDlSym = DlSym;
  v.xDlClose = DlClose;
  v.xRandomness = Randomness;
  v.xSleep = Sleep;
  v.xCurrentTime = CurrentTime;
  v.xGetLastError = GetLastError;
  v.xCurrentTimeInt64 = CurrentTimeInt64;
  if (int rc = sqlite3_vfs_register(&v, /*makeDflt=*/0); rc != SQLITE_OK) {
    return Status::Internal(std::string("registering a SQLite VFS failed: ") + sqlite3_errstr(rc));
  }
  std::string name = r->name;
  registered.emplace(base_name, std::move(r));
  return name;
}

}  // namespace fencekit::fencedstore
