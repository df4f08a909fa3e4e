// A SQLite VFS over another that hands the WAL what a commit appends in one write instead of
// two per page (a frame's 24-byte header, then its page), at the sync that makes it durable.
// Under synchronous=FULL SQLite syncs the WAL before a commit becomes visible to other
// connections, so they never read what is held back. Private to fencedstore.
#pragma once

#include <string>

#include "fencekit/common/status.h"

namespace fencekit::fencedstore {

// The name of the batching VFS over `base` (a registered VFS's name; empty: the default one),
// registered on first use. Fails with kInvalidArgument when `base` is not registered. Only for
// a connection at synchronous=FULL: with less, a commit may become visible before its frames
// reach the file. Thread safety: safe for concurrent use.
Result<std::string> WalWriteBatchingVfs(const std::string& base);

}  // namespace fencekit::fencedstore
