// Renewal that neither dies nor outlives its lock (HeldLock with auto_renew), on real servers:
// it carries on over a new connection after redis-server restarts and after the etcd member it
// talks to dies; a renewal held up in the network (DelayProxy) can neither delay Release() past
// its own timeout nor extend or re-take the lock when it arrives after the release; and a
// renewal that cannot succeed loses the lease at the end of its validity, not later.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/delay_proxy.h"
#include "support/servers/etcd_server.h"
#include "support/servers/lock_services.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::Backend;
using testing::EtcdCluster;
using testing::LockService;
using testing::RedisServer;
using testing::TempDir;
using testing::WaitFor;

std::unique_ptr<LockClient> Open(const std::string& uri, LockOptions options = {}) {
  return testing::OpenLockClient(uri, options);
}

TEST(RenewalTest, RedisRestartedWithItsDataRenewalCarriesOnOverANewConnection) {
  TempDir dir;
  RedisServer redis(RedisServer::Persistent(dir.path()));
  auto client = Open(redis.uri(), {.op_timeout = 300ms});
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job", 1500ms);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  HeldLock held(*client, *lease, {.auto_renew = true});
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= 1; }));

  redis.RestartKeepingData();  // every pooled connection is now broken
  const auto before = held.renewals();
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= before + 3 || held.lost(); }))
      << "renewal stopped after the restart";
  EXPECT_FALSE(held.lost()) << held.lost_reason().ToString();
  auto info = Open(redis.uri())->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, lease->owner);
  EXPECT_TRUE(held.Release().ok());
}

TEST(RenewalTest, EtcdMemberTheClientTalksToIsKilledRenewalCarriesOnThroughAnother) {
  EtcdCluster etcd(3);
  int leader = etcd.Leader();
  ASSERT_GE(leader, 0);
  // The leader first in the URI, so the renewals go to it until it dies.
  std::string uri = etcd.uri(leader);
  auto client = Open(uri);
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("job", 3s);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  HeldLock held(*client, *lease, {.auto_renew = true});
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= 1; }));

  etcd.Kill(leader);
  const auto before = held.renewals();
  ASSERT_TRUE(WaitFor([&] { return held.renewals() >= before + 2 || held.lost(); }, 15s))
      << "renewal stopped after the member died";
  EXPECT_FALSE(held.lost()) << held.lost_reason().ToString();
  auto info = client->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, lease->owner);
  EXPECT_EQ(info->token, lease->token);
  EXPECT_TRUE(held.Release().ok());
}

// A lock service behind a DelayProxy, and what identifies a renewal in the bytes sent to it.
class HeldRenewalTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    LockService service(GetParam(), dir_);
    redis_ = std::move(service.redis);
    etcd_ = std::move(service.etcd);
    direct_uri_ = service.uri;
    auto proxy = procutil::DelayProxy::Start(redis_ ? redis_->port() : etcd_->client_port(0));
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(proxy).value();
    proxied_uri_ = std::string(redis_ ? "redis://" : "etcd://") +
                   "127.0.0.1:" + std::to_string(proxy_->port());
  }

  // The shortest ttl the service keeps as asked (etcd grants whole seconds).
  std::chrono::milliseconds ShortTtl() const { return redis_ ? 600ms : 1s; }

  // Bytes only a renewal of a lease of `ttl` sends: Redis, the extend script's ttl argument
  // (a release sends LockOptions::ttl, 10 s by default); etcd, the keep-alive call.
  std::string Renewal(std::chrono::milliseconds ttl) const {
    if (!redis_) return "/v3/lease/keepalive";
    std::string ms = std::to_string(ttl.count());
    return "$" + std::to_string(ms.size()) + "\r\n" + ms + "\r\n";
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::string direct_uri_, proxied_uri_;
  std::unique_ptr<procutil::DelayProxy> proxy_;
};

TEST_P(HeldRenewalTest, ARenewalHeldPastReleaseNeitherDelaysItNorExtendsOrRetakesTheLock) {
  auto client = Open(proxied_uri_, {.op_timeout = 300ms});
  ASSERT_NE(client, nullptr);
  // Long enough for a release that first waits for the renewal's tries (Redis: 2, etcd: 3 of
  // 300 ms each) to come well before the lease expires.
  const std::chrono::milliseconds ttl = redis_ ? 3s : 5s;
  auto lease = client->TryAcquire("job", ttl);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  HeldLock held(*client, *lease, {.auto_renew = true});
  proxy_->HoldWhen(Renewal(ttl));
  ASSERT_TRUE(proxy_->WaitForHeld(1, 10s)) << "no renewal went through the proxy";
  const auto renewals = held.renewals();

  // Release while a renewal is in flight: it waits for that renewal to give up (op_timeout per
  // try), then releases.
  auto started = std::chrono::steady_clock::now();
  Status released = held.Release();
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(released.ok()) << released.ToString();
  EXPECT_LT(took, ttl) << "Release waited "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << "ms for the renewal";
  EXPECT_FALSE(held.lost());

  // Another client takes the lock, for less time than the held renewal asks for.
  auto other = Open(direct_uri_);
  ASSERT_NE(other, nullptr);
  auto next = other->TryAcquire("job", ShortTtl());
  ASSERT_TRUE(next.ok()) << next.status().ToString();

  // The held renewals arrive now, after the release and the new grant, and change nothing.
  proxy_->Release();
  ASSERT_TRUE(proxy_->WaitForAnswers(10s)) << "the server never answered the held renewals";
  auto info = other->Inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->owner, next->owner);
  EXPECT_LE(info->remaining, ShortTtl());
  EXPECT_EQ(held.renewals(), renewals) << "a renewal succeeded after Release() returned";
  Status extend = client->Extend(*lease);
  EXPECT_TRUE(extend.IsNotHeld()) << extend.ToString();
  EXPECT_NE(extend.message().find("already released"), std::string::npos) << extend.message();
  EXPECT_TRUE(other->Release(*next).ok());
}

TEST_P(HeldRenewalTest, ARenewalHeldInTheNetworkLosesTheLeaseAtTheEndOfItsValidity) {
  // Each request may wait 5 s for its answer: far longer than the lease is valid.
  auto client = Open(proxied_uri_, {.op_timeout = 5s});
  ASSERT_NE(client, nullptr);
  const auto ttl = 2 * ShortTtl();
  auto lease = client->TryAcquire("job", ttl);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  std::promise<std::chrono::steady_clock::time_point> lost_at;
  proxy_->HoldWhen(Renewal(ttl));  // the first renewal waits for an answer that never comes
  HeldLock held(*client, *lease, {.auto_renew = true, .on_lost = [&](const Lease&, const Status&) {
                                    lost_at.set_value(std::chrono::steady_clock::now());
                                  }});
  ASSERT_TRUE(proxy_->WaitForHeld(1, ttl)) << "no renewal went through the proxy";
  auto when = lost_at.get_future();
  ASSERT_EQ(when.wait_for(10s), std::future_status::ready) << "the lease was never marked lost";
  auto lost = when.get();
  EXPECT_GE(lost, lease->valid_until);
  EXPECT_LT(lost, lease->valid_until + 200ms) << "marked lost long after its validity ended";
  EXPECT_TRUE(held.lost());
  EXPECT_NE(held.lost_reason().message().find("before its validity ran out"), std::string::npos)
      << held.lost_reason().message();
  proxy_->Release();  // so that the renewal ends, and Release() with it
  EXPECT_TRUE(held.Release().IsNotHeld());
}

INSTANTIATE_TEST_SUITE_P(NetworkBackends, HeldRenewalTest,
                         ::testing::Values(Backend::kRedis, Backend::kEtcd), testing::BackendName);

}  // namespace
}  // namespace fencekit
