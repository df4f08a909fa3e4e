// Calls on a ZooKeeper server behind the lock client's back, through the C client's
// synchronous API: what tests do to a lock's znodes that no client of the lock would.
#pragma once

#include <string>

namespace fencekit::testing {

// Deletes every child of `path` on the server at `hosts` ("h:p,..."); the number deleted, or
// -1 when the server did not answer (within 10 s) or refused.
int ZookeeperDeleteChildren(const std::string& hosts, const std::string& path);

}  // namespace fencekit::testing
