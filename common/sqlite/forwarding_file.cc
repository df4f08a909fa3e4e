#include "sqlite/forwarding_file.h"

namespace fencekit::sqlite {

namespace {

int Close(sqlite3_file* f) { return Inner(f)->pMethods->xClose(Inner(f)); }
int Read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return Inner(f)->pMethods->xRead(Inner(f), p, n, off);
}
int Write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  return Inner(f)->pMethods->xWrite(Inner(f), p, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Inner(f)->pMethods->xTruncate(Inner(f), size);
}
int Sync(sqlite3_file* f, int flags) { return Inner(f)->pMethods->xSync(Inner(f), flags); }
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Inner(f)->pMethods->xFileSize(Inner(f), size);
}
int Lock(sqlite3_file* f, int l) { return Inner(f)->pMethods->xLock(Inner(f), l); }
int Unlock(sqlite3_file* f, int l) { return Inner(f)->pMethods->xUnlock(Inner(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Inner(f)->pMethods->xCheckReservedLock(Inner(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Inner(f)->pMethods->xFileControl(Inner(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Inner(f)->pMethods->xSectorSize(Inner(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Inner(f)->pMethods->xDeviceCharacteristics(Inner(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Inner(f)->pMethods->xShmMap(Inner(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Inner(f)->pMethods->xShmLock(Inner(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Inner(f)->pMethods->xShmBarrier(Inner(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return Inner(f)->pMethods->xShmUnmap(Inner(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return Inner(f)->pMethods->xFetch(Inner(f), off, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Inner(f)->pMethods->xUnfetch(Inner(f), off, p);
}

template <typename F>
void Or(F& chosen, F fallback) {
  if (chosen == nullptr) chosen = fallback;
}

}  // namespace

sqlite3_io_methods ForwardingMethods(const sqlite3_io_methods& overrides) {
  sqlite3_io_methods m = overrides;
  m.iVersion = 3;
  Or(m.xClose, Close);
  Or(m.xRead, Read);
  Or(m.xWrite, Write);
  Or(m.xTruncate, Truncate);
  Or(m.xSync, Sync);
  Or(m.xFileSize, FileSize);
  Or(m.xLock, Lock);
  Or(m.xUnlock, Unlock);
  Or(m.xCheckReservedLock, CheckReservedLock);
  Or(m.xFileControl, FileControl);
  Or(m.xSectorSize, SectorSize);
  Or(m.xDeviceCharacteristics, DeviceCharacteristics);
  Or(m.xShmMap, ShmMap);
  Or(m.xShmLock, ShmLock);
  Or(m.xShmBarrier, ShmBarrier);
  Or(m.xShmUnmap, ShmUnmap);
  Or(m.xFetch, Fetch);
  Or(m.xUnfetch, Unfetch);
  return m;
}

}  // namespace fencekit::sqlite
