#include "support/servers/lock_services.h"

namespace fencekit::testing {

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kSqlite:
      return "Sqlite";
    case Backend::kRedis:
      return "Redis";
    case Backend::kRedlock:
      return "Redlock";
    case Backend::kEtcd:
      return "Etcd";
    case Backend::kZookeeper:
      return "Zookeeper";
  }
  return "";
}

std::unique_ptr<LockClient> OpenLockClient(const std::string& uri, LockOptions options) {
  auto c = LockClient::Open(uri, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

std::string RedlockUri(const std::vector<std::unique_ptr<RedisServer>>& nodes) {
  std::string uri = "redlock://";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    uri += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes[i]->port());
  }
  return uri;
}

LockService::LockService(Backend backend, const TempDir& dir) {
  switch (backend) {
    case Backend::kRedis:
      redis = std::make_unique<RedisServer>();
      uri = redis->uri();
      break;
    case Backend::kRedlock:
      for (int i = 0; i < 5; ++i) nodes.push_back(std::make_unique<RedisServer>());
      uri = RedlockUri(nodes);
      break;
    case Backend::kEtcd:
      etcd = std::make_unique<EtcdCluster>(1);
      uri = etcd->uri();
      break;
    case Backend::kSqlite:
      uri = "sqlite://" + dir.File("locks.db");
      break;
    case Backend::kZookeeper: {
      zookeeper = std::make_unique<procutil::ZookeeperEnsemble>();
      Status s = zookeeper->Start({.members = 1,
                                   .dir = dir.File("zookeeper"),
                                   .max_session_timeout = std::chrono::seconds(60)});
      EXPECT_TRUE(s.ok()) << s.ToString();
      uri = "zk://" + zookeeper->connect_string();
      break;
    }
  }
}

}  // namespace fencekit::testing
