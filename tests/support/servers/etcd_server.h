// Real etcd processes for tests (procutil::EtcdCluster): one member or a cluster on loopback,
// data in a temporary folder. Not thread-safe: drive it from the test's own thread.
#pragma once

#include "fencekit/procutil/etcd_cluster.h"

namespace fencekit::testing {

class EtcdCluster : public procutil::EtcdCluster {
 public:
  // Starts `members` processes (1 = a single node) and waits up to 15s until every member
  // answers and they have a leader; fails the test if not, with the members' log tails.
  explicit EtcdCluster(int members = 1);
  // The same with every option (TLS, auth token TTL, ...).
  explicit EtcdCluster(procutil::EtcdOptions options);
};

}  // namespace fencekit::testing
