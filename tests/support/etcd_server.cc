#include "support/etcd_server.h"

#include <gtest/gtest.h>

namespace fencekit::testing {

EtcdCluster::EtcdCluster(int members) {
  Status s = Start({.members = members});
  EXPECT_TRUE(s.ok()) << s.message() << "\n(scripts/test installs etcd-server)";
}

}  // namespace fencekit::testing
