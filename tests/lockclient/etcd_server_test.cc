// Smoke test of the EtcdCluster test support (tests/support/servers/etcd_server.h) against real etcd.
#include "support/servers/etcd_server.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace fencekit::testing {
namespace {

TEST(EtcdClusterSupportTest, ThreeMembersElectAnotherLeaderWhenTheirLeaderIsPausedOrKilled) {
  EtcdCluster etcd(3);
  ASSERT_FALSE(HasFailure()) << "the cluster did not start";
  ASSERT_EQ(etcd.size(), 3);
  EXPECT_EQ(etcd.uri(), "etcd://127.0.0.1:" + std::to_string(etcd.client_port(0)) +
                            ",127.0.0.1:" + std::to_string(etcd.client_port(1)) +
                            ",127.0.0.1:" + std::to_string(etcd.client_port(2)));
  EXPECT_EQ(etcd.member_uri(1), "etcd://127.0.0.1:" + std::to_string(etcd.client_port(1)));

  int first = etcd.Leader();
  ASSERT_GE(first, 0);
  etcd.Pause(first);
  int second = etcd.Leader();
  ASSERT_GE(second, 0);
  EXPECT_NE(second, first);
  // Back from its pause, the old leader must not be reported as leader again.
  etcd.Resume(first);
  EXPECT_EQ(etcd.Leader(), second);

  etcd.Kill(second);
  int third = etcd.Leader();
  ASSERT_GE(third, 0);
  EXPECT_NE(third, second);
}

TEST(EtcdClusterSupportTest, DeleteKeyDeletesAKeyPutThroughTheGateway) {
  EtcdCluster etcd(1);
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  RawConnection conn(etcd.client_port(0));
  ASSERT_TRUE(conn.connected());
  // key "fencekit/smoke", value "v", base64 as the gateway wants bytes.
  conn.Send(Request("POST", "/v3/kv/put", {{"Content-Type", "application/json"}},
                    R"({"key":"ZmVuY2VraXQvc21va2U=","value":"dg=="})"));
  EXPECT_EQ(conn.Read().status, 200);
  EXPECT_EQ(etcd.DeleteKey("fencekit/smoke"), 1);
  EXPECT_EQ(etcd.DeleteKey("fencekit/smoke"), 0);
}

}  // namespace
}  // namespace fencekit::testing
