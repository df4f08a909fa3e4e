// Lock-service identity and LockClient::CheckToken, against the real services: an SQLite file,
// redis-server, a 5-node Redlock set and etcd, all started by the test.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <boost/json/parse.hpp>

#include "fencekit/common/names.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/etcd_server.h"
#include "support/servers/redis_server.h"
#include "support/servers/lock_services.h"
#include "support/matching.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::RedisServer;
using testing::TempDir;

using testing::Backend;
using testing::LockService;
using testing::OpenLockClient;

std::string Name(const ::testing::TestParamInfo<Backend>& info) {
  return testing::BackendName(info);
}

class TokenCheckTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    LockService service(GetParam(), dir_);
    redis_ = std::move(service.redis);
    nodes_ = std::move(service.nodes);
    etcd_ = std::move(service.etcd);
    zookeeper_ = std::move(service.zookeeper);
    uri_ = service.uri;
    client_ = OpenLockClient(uri_, {.op_timeout = 500ms});
    ASSERT_NE(client_, nullptr);
  }

  // The service id's expected form for this backend.
  std::string IdForm() const {
    switch (GetParam()) {
      case Backend::kSqlite:
        return "sqlite:[0-9a-f]{32}";
      case Backend::kRedis:
        return "redis:[0-9a-f]{32}";
      case Backend::kRedlock:
        return "redlock:[0-9a-f]{32}";
      case Backend::kEtcd:
        return "etcd:[0-9a-f]{1,16}";
      case Backend::kZookeeper:
        return "zookeeper:[0-9a-f]{32}";
    }
    return "";
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;  // Redlock
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<procutil::ZookeeperEnsemble> zookeeper_;
  std::string uri_;
  std::unique_ptr<LockClient> client_;
};

// What Inspect says, less the time left (which moves by itself).
std::string Snapshot(LockClient& client, const std::string& lock) {
  auto info = client.Inspect(lock);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return "";
  return std::to_string(info->held) + "|" + info->owner + "|" +
         (info->token ? info->token->ToString() : "-") + "|" +
         (info->last_token ? info->last_token->ToString() : "-");
}

TEST_P(TokenCheckTest, HoldersTokenIsCurrentAndTheServiceIsTheLeases) {
  auto lease = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(CheckServiceId(lease->service).ok()) << lease->service;
  EXPECT_TRUE(testing::FullMatch(lease->service, IdForm())) << lease->service;
  EXPECT_EQ(client_->service_id(), lease->service);

  auto check = client_->CheckToken("job", lease->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_TRUE(check->current);
  ASSERT_TRUE(check->holder.has_value());
  EXPECT_EQ(*check->holder, lease->token);
  EXPECT_EQ(check->service, lease->service);

  // Another client of the same service sees the same id and the same answer.
  auto other = OpenLockClient(uri_);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->service_id(), lease->service);
  auto again = other->CheckToken("job", lease->token);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->current);
}

TEST_P(TokenCheckTest, ForgedHigherAndStaleLowerTokensAreNotCurrentAndTheCheckChangesNothing) {
  auto first = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(client_->Release(*first).ok());
  auto holder = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_GT(holder->token, first->token);

  const std::string before = Snapshot(*client_, "job");
  auto forged = FencingToken::FromInt(holder->token.value() + 1000).value();
  for (FencingToken t : {first->token, forged}) {
    auto check = client_->CheckToken("job", t);
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    EXPECT_FALSE(check->current) << t.ToString();
    ASSERT_TRUE(check->holder.has_value());
    EXPECT_EQ(*check->holder, holder->token);
    EXPECT_EQ(check->service, holder->service);
  }
  EXPECT_EQ(Snapshot(*client_, "job"), before);  // the checks changed nothing
  auto still = client_->CheckToken("job", holder->token);
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_TRUE(still->current);
  // Nor did they move the counter: the next grant is the next token (etcd and ZooKeeper: their
  // revision and zxid move with every write, so only "greater").
  ASSERT_TRUE(client_->Release(*holder).ok());
  auto next = client_->TryAcquire("job");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  if (GetParam() == Backend::kEtcd || GetParam() == Backend::kZookeeper) {
    EXPECT_GT(next->token, holder->token);
  } else {
    EXPECT_EQ(next->token.value(), holder->token.value() + 1);
  }
}

TEST_P(TokenCheckTest, ReleasedLeasesTokenIsNotCurrentAndNoHolderIsReported) {
  auto lease = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Release(*lease).ok());
  auto check = client_->CheckToken("job", lease->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_FALSE(check->current);
  EXPECT_FALSE(check->holder.has_value());
  EXPECT_EQ(check->service, lease->service);
  // A lock never granted: not current either.
  auto never = client_->CheckToken("never", FencingToken());
  ASSERT_TRUE(never.ok()) << never.status().ToString();
  EXPECT_FALSE(never->current);
}

TEST_P(TokenCheckTest, CheckRefusesABadLockName) {
  auto check = client_->CheckToken("", FencingToken());
  EXPECT_TRUE(check.status().IsInvalidArgument()) << check.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(Backends, TokenCheckTest,
                         ::testing::Values(Backend::kSqlite, Backend::kRedis, Backend::kRedlock,
                                           Backend::kEtcd, Backend::kZookeeper),
                         Name);

// The network services, stopped after open: the check says it cannot ask, within the timeout.
class StoppedServiceTest : public TokenCheckTest {};

TEST_P(StoppedServiceTest, CheckFailsUnavailableWithinTheOpTimeout) {
  auto lease = client_->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  if (redis_) redis_->Stop();
  for (int i : {0, 2, 4}) {
    if (!nodes_.empty()) nodes_[i]->Stop();
  }
  if (etcd_) etcd_->Kill(0);
  if (zookeeper_) zookeeper_->Kill(0);
  auto start = std::chrono::steady_clock::now();
  auto check = client_->CheckToken("job", lease->token);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(check.ok());
  EXPECT_TRUE(check.status().IsUnavailable() || check.status().IsTimeout())
      << check.status().ToString();
  EXPECT_LT(took, 500ms + 250ms);
}

INSTANTIATE_TEST_SUITE_P(NetworkBackends, StoppedServiceTest,
                         ::testing::Values(Backend::kRedis, Backend::kRedlock, Backend::kEtcd,
                                           Backend::kZookeeper),
                         Name);

// --- SQLite: the id lives in the database ---

TEST(SqliteServiceIdTest, TwoDatabasesDifferAndOneKeepsItsIdAcrossReopen) {
  TempDir dir;
  const std::string a = "sqlite://" + dir.File("a.db"), b = "sqlite://" + dir.File("b.db");
  std::string id_a = OpenLockClient(a)->service_id(), id_b = OpenLockClient(b)->service_id();
  EXPECT_TRUE(testing::FullMatch(id_a, "sqlite:[0-9a-f]{32}")) << id_a;
  EXPECT_NE(id_a, id_b);
  auto reopened = OpenLockClient(a);
  EXPECT_EQ(reopened->service_id(), id_a);
  auto lease = reopened->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->service, id_a);
}

TEST(SqliteServiceIdTest, VersionOneDatabaseGetsAnIdOnOpenAndKeepsItsCounters) {
  TempDir dir;
  const std::string path = dir.File("v1.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  // The version 1 schema, as fencekit made it before lock-service ids.
  const char* v1 =
      "CREATE TABLE locks(name BLOB PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, "
      "expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
      "CREATE TABLE counters(name BLOB PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID;"
      "INSERT INTO counters VALUES(CAST('job' AS BLOB), 41);"
      "PRAGMA application_id=1179403083; PRAGMA user_version=1;";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);

  auto client = OpenLockClient("sqlite://" + path);
  ASSERT_NE(client, nullptr);
  const std::string id = client->service_id();
  EXPECT_TRUE(testing::FullMatch(id, "sqlite:[0-9a-f]{32}")) << id;
  auto lease = client->TryAcquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->token.value(), 42);
  EXPECT_EQ(lease->service, id);
  EXPECT_EQ(OpenLockClient("sqlite://" + path)->service_id(), id);  // made once
}

// --- Redis: the id is lost with the data ---

TEST(RedisServiceIdTest, FlushallGivesANewIdOnTheNextGrant) {
  RedisServer redis;
  auto client = OpenLockClient(redis.uri());
  auto lease = client->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const std::string old_id = lease->service;

  redis.Command({"FLUSHALL"});  // data loss: the holder, the counters and the id
  auto check = client->CheckToken("job", lease->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_FALSE(check->current);
  EXPECT_EQ(check->service, "");  // no id until the next grant makes one
  EXPECT_EQ(redis.Command({"EXISTS", "fencekit:service"}), 0);  // the check made none

  auto next = OpenLockClient(redis.uri())->TryAcquire("other");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_NE(next->service, old_id);
  EXPECT_TRUE(testing::FullMatch(next->service, "redis:[0-9a-f]{32}")) << next->service;
  // This client learns the new id from its next grant, and grants under it from then on.
  auto mine = client->TryAcquire("job");
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->service, next->service);
  EXPECT_EQ(client->service_id(), next->service);
}

// --- Redlock: the id a majority agrees on ---

class RedlockServiceIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 5; ++i) nodes_.push_back(std::make_unique<RedisServer>());
  }
  std::string Uri() const { return testing::RedlockUri(nodes_); }
  // The id stored on node i (an EVAL returning the string as a status would need parsing, so
  // compare instead: 1 when it equals `id`).
  bool NodeHasId(int i, const std::string& id) {
    return nodes_[i]->Command({"EVAL", "return redis.call('get', KEYS[1]) == ARGV[1] and 1 or 0",
                               "1", "fencekit:service", id}) == 1;
  }
  void SetId(int i, const std::string& id) { nodes_[i]->Command({"SET", "fencekit:service", id}); }
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

TEST_F(RedlockServiceIdTest, OpenMakesOneIdForAllNodesAndADivergentNodeAdoptsTheMajoritys) {
  SetId(4, "redlock:0123456789abcdef0123456789abcdef");  // e.g. left from another set
  auto client = OpenLockClient(Uri());
  const std::string id = client->service_id();
  EXPECT_TRUE(testing::FullMatch(id, "redlock:[0-9a-f]{32}")) << id;
  EXPECT_NE(id, "redlock:0123456789abcdef0123456789abcdef");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(NodeHasId(i, id)) << i;
}

TEST_F(RedlockServiceIdTest, LeaseServiceIsTheMajorityIdAndTheOddNodeAdoptsIt) {
  auto client = OpenLockClient(Uri());
  const std::string id = client->service_id();
  nodes_[3]->Stop();
  nodes_[4]->Stop();
  SetId(1, "redlock:ffffffffffffffffffffffffffffffff");  // as if node 1 lost its data
  auto lease = client->TryAcquire("job", 30s);           // nodes 0, 1, 2 must all grant
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->service, id);
  EXPECT_TRUE(NodeHasId(1, id));  // the write-back round made node 1 adopt it
  auto check = client->CheckToken("job", lease->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_TRUE(check->current);
  EXPECT_EQ(check->service, id);
}

TEST_F(RedlockServiceIdTest, GrantFailsUnavailableWhenTheGrantingNodesAgreeOnNoId) {
  auto client = OpenLockClient(Uri());
  nodes_[3]->Stop();
  nodes_[4]->Stop();
  SetId(0, "redlock:00000000000000000000000000000000");
  SetId(1, "redlock:11111111111111111111111111111111");
  auto lease = client->TryAcquire("job", 30s);
  ASSERT_FALSE(lease.ok());
  EXPECT_TRUE(lease.status().IsUnavailable()) << lease.status().ToString();
  EXPECT_NE(lease.status().message().find("service id"), std::string::npos)
      << lease.status().message();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(nodes_[i]->Command({"EXISTS", "fencekit:{job}:lock"}), 0);
}

TEST_F(RedlockServiceIdTest, CheckNeedsAMajorityHoldingTheToken) {
  auto client = OpenLockClient(Uri());
  auto lease = client->TryAcquire("job", 30s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  // Three of five nodes lose the key (a clock jump there): no majority holds the token.
  for (int i : {0, 1, 2}) ASSERT_EQ(nodes_[i]->Command({"DEL", "fencekit:{job}:lock"}), 1);
  auto check = client->CheckToken("job", lease->token);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_FALSE(check->current);
  EXPECT_FALSE(check->holder.has_value());
}

// --- fencectl: the service in acquire, run and put; check-token ---

boost::json::object Json(const std::string& text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  EXPECT_FALSE(ec) << "not JSON: " << text;
  return !ec && v.is_object() ? v.as_object() : boost::json::object();
}

TEST(FencectlServiceTest, AcquirePrintsTheServiceAndCheckTokenExitsZeroWhenCurrentThreeWhenNot) {
  TempDir dir;
  const std::string locks = "FENCEKIT_LOCKS=sqlite://" + dir.File("locks.db");
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::FencectlBinary());
    return testing::RunCommand(args, {locks});
  };
  auto acquired = ctl({"acquire", "--ttl", "30s", "job"});
  ASSERT_EQ(acquired.exit_code, 0) << acquired.err;
  auto lease = Json(acquired.out);
  const std::string service(lease["service"].as_string());
  EXPECT_TRUE(testing::FullMatch(service, "sqlite:[0-9a-f]{32}")) << service;
  const std::string token = std::to_string(lease["token"].as_int64());

  auto current = ctl({"check-token", "--token", token, "job"});
  ASSERT_EQ(current.exit_code, 0) << current.err;
  auto check = Json(current.out);
  EXPECT_EQ(check["current"].as_bool(), true);
  EXPECT_EQ(std::to_string(check["holder"].as_int64()), token);
  EXPECT_EQ(check["service"].as_string(), service);

  auto forged = ctl({"check-token", "--token", "9999", "job"});
  EXPECT_EQ(forged.exit_code, 3) << forged.err;
  EXPECT_EQ(Json(forged.out)["current"].as_bool(), false);
  auto bad = ctl({"check-token", "--token", "-1", "job"});
  EXPECT_EQ(bad.exit_code, 64) << "a usage error";
  EXPECT_NE(bad.err.find("token"), std::string::npos) << bad.err;

  // run: the command sees the lease's service beside its token.
  auto run = ctl({"run", "other", "--", "sh", "-c", "echo \"$FENCING_SERVICE\""});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, service + "\n");
}

TEST(FencectlServiceTest, PutTakesTheServiceFromTheEnvironmentAndRefusesAMalformedOne) {
  // Refused by the client before anything is sent, so no store need listen.
  auto put = [&](std::vector<std::string> extra, std::vector<std::string> env) {
    std::vector<std::string> args = {testing::FencectlBinary(),
                                     "put",
                                     "--store",
                                     "http://127.0.0.1:9",
                                     "--lock",
                                     "job",
                                     "--token",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"key", "value"});
    return testing::RunCommand(args, env);
  };
  for (auto r : {put({"--service", "bad id"}, {}), put({}, {"FENCING_SERVICE=bad id"})}) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("lock service id"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace fencekit
