// The four lock services a parameterized lock test runs against, each a real server (or file)
// started for the test and stopped with it. Thread safety: not safe for concurrent use.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/zookeeper_ensemble.h"
#include "support/servers/etcd_server.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit::testing {

enum class Backend { kSqlite, kRedis, kRedlock, kEtcd, kZookeeper };

// "Sqlite", "Redis", "Redlock", "Etcd", "Zookeeper": the suffix of a parameterized test's name.
std::string BackendName(const ::testing::TestParamInfo<Backend>& info);

// LockClient::Open, failing the current test (and returning null) when it fails.
std::unique_ptr<LockClient> OpenLockClient(const std::string& uri, LockOptions options = {});

// "redlock://127.0.0.1:p1,127.0.0.1:p2,...".
std::string RedlockUri(const std::vector<std::unique_ptr<RedisServer>>& nodes);

// Starts the service of `backend`: SQLite a database file in `dir`, Redis one server, Redlock
// five, etcd a one-member cluster, ZooKeeper one standalone server (sessions up to 60s). The
// servers are handed over by moving the members out.
struct LockService {
  LockService(Backend backend, const TempDir& dir);

  std::unique_ptr<RedisServer> redis;
  std::vector<std::unique_ptr<RedisServer>> nodes;  // Redlock
  std::unique_ptr<EtcdCluster> etcd;
  std::unique_ptr<procutil::ZookeeperEnsemble> zookeeper;
  std::string uri;
};

}  // namespace fencekit::testing
