#include "sqlite/wal_write_batching.h"

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>

#include "fencekit/common/mutex.h"
#include "sqlite/forwarding_file.h"

namespace fencekit::fencedstore {

namespace {

// What a WAL file was handed and has not yet written: bytes from `start`, one run.
struct HeldRun {
  std::string bytes;
  sqlite3_int64 start = 0;
};
// Past this a run is written at once, so a large transaction's frames never all wait in memory.
// Below 128 KiB: SQLite's unix VFS writes at most 128 KiB - 1 bytes per call, and takes a longer
// write's shortfall for a full disk.
constexpr std::size_t kMaxPending = std::size_t{64} << 10;

// A WAL file. Files that are not a WAL are opened in place with the base VFS's methods and
// never reach the functions below.
struct WalFile {
  sqlite::ForwardingFile forwarding;
  HeldRun* pending;
};

HeldRun* HeldBy(sqlite3_file* f) { return reinterpret_cast<WalFile*>(f)->pending; }

// Writes the held run, if any; SQLITE_OK or the inner write's error (the run is dropped either
// way: SQLite rolls back a transaction whose write failed).
int Flush(sqlite3_file* f) {
  HeldRun* p = HeldBy(f);
  if (p->bytes.empty()) return SQLITE_OK;
  sqlite3_file* inner = sqlite::Inner(f);
  int rc =
      inner->pMethods->xWrite(inner, p->bytes.data(), static_cast<int>(p->bytes.size()), p->start);
  p->bytes.clear();
  return rc;
}

int Close(sqlite3_file* f) {
  int flushed = Flush(f);
  auto* w = reinterpret_cast<WalFile*>(f);
  delete w->pending;
  w->pending = nullptr;
  sqlite3_file* inner = sqlite::Inner(f);
  int rc = inner->pMethods != nullptr ? inner->pMethods->xClose(inner) : SQLITE_OK;
  return flushed != SQLITE_OK ? flushed : rc;
}
int Read(sqlite3_file* f, void* out, int n, sqlite3_int64 off) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return sqlite::Inner(f)->pMethods->xRead(sqlite::Inner(f), out, n, off);
}
int Write(sqlite3_file* f, const void* data, int n, sqlite3_int64 off) {
  HeldRun* p = HeldBy(f);
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
  return sqlite::Inner(f)->pMethods->xTruncate(sqlite::Inner(f), size);
}
int Sync(sqlite3_file* f, int flags) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return sqlite::Inner(f)->pMethods->xSync(sqlite::Inner(f), flags);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return sqlite::Inner(f)->pMethods->xFileSize(sqlite::Inner(f), size);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return sqlite::Inner(f)->pMethods->xFileControl(sqlite::Inner(f), op, arg);
}
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  if (int rc = Flush(f); rc != SQLITE_OK) return rc;
  return sqlite::Inner(f)->pMethods->xFetch(sqlite::Inner(f), off, n, out);
}

// Every call that reads the file, or its size, or syncs it, writes the held run first.
const sqlite3_io_methods kWalMethods = [] {
  sqlite3_io_methods m{};
  m.xClose = Close;
  m.xRead = Read;
  m.xWrite = Write;
  m.xTruncate = Truncate;
  m.xSync = Sync;
  m.xFileSize = FileSize;
  m.xFileControl = FileControl;
  m.xFetch = Fetch;
  return sqlite::ForwardingMethods(m);
}();

sqlite3_vfs* Base(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

int Open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  sqlite3_vfs* base = Base(vfs);
  if ((flags & SQLITE_OPEN_WAL) == 0) return base->xOpen(base, name, f, flags, out_flags);
  auto* w = reinterpret_cast<WalFile*>(f);
  w->forwarding.base.pMethods = nullptr;
  w->forwarding.inner = reinterpret_cast<sqlite3_file*>(w + 1);
  w->pending = new (std::nothrow) HeldRun;
  if (w->pending == nullptr) return SQLITE_NOMEM;
  int rc = base->xOpen(base, name, w->forwarding.inner, flags, out_flags);
  if (rc != SQLITE_OK || w->forwarding.inner->pMethods == nullptr) {
    delete w->pending;
    w->pending = nullptr;
    return rc;
  }
  w->forwarding.base.pMethods = &kWalMethods;
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
