// Opening one SQLite connection to the store's file with the store's settings, and the SQLite
// storage (OpenSqliteStorage, store_engine.h). Private to fencedstore.
#pragma once

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"
#include "sqlite/sqlite_util.h"

namespace fencekit::fencedstore {

// Opens `o.path` (created unless `read_only`) with extended result codes, a 5 s busy timeout and
// the synchronous level of `o.durability`; a `read_only` connection is also query_only. The
// writer's connection (not `read_only`) checkpoints every 4,000 WAL pages and, under
// Durability::kFull, writes its WAL through WalWriteBatchingVfs. Fails with kIoError naming the
// path.
Result<sqlite::Db> OpenConnection(const StoreOptions& o, bool read_only);

}  // namespace fencekit::fencedstore
