#include "support/servers/etcd_server.h"

#include <gtest/gtest.h>

namespace fencekit::testing {

EtcdCluster::EtcdCluster(int members) : EtcdCluster(procutil::EtcdOptions{.members = members}) {}

EtcdCluster::EtcdCluster(procutil::EtcdOptions options) {
  Status s = Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.message() << "\n(scripts/test installs etcd-server)";
}

}  // namespace fencekit::testing
