// fenced --verify-with redis://... against a real redis-server started by the test: forged
// tokens are refused, a holder's writes cost one call to the lock service, a lock service that
// cannot be asked fails writes closed.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <thread>

#include "fencekit/lockclient/lock_client.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::TempDir;
using testing::WaitFor;

class HttpVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = LockClient::Open(redis_.uri());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    locks_ = std::move(client).value();
    fenced_ = std::make_unique<FencedProcess>(
        dir_.File("store.db"), std::vector<std::string>{"--verify-with", redis_.uri()});
  }

  RawResponse Call(std::string_view method, std::string_view target,
                   const std::vector<std::pair<std::string, std::string>>& headers = {},
                   std::string_view body = {}) {
    RawConnection c(fenced_->port());
    c.Send(Request(method, target, headers, body));
    return c.Read();
  }
  RawResponse Put(const std::string& key, FencingToken token) {
    return Call("PUT", "/v1/objects/" + key,
                {{"Fencing-Token", token.ToString()}, {"Fencing-Lock", "lock"}}, "v");
  }
  std::int64_t Fence() {
    return boost::json::parse(Call("GET", "/v1/fences/lock").body).at("highest").as_int64();
  }
  // The value of one metric line, e.g. Metric("fenced_verifications_total"); -1 when absent.
  long long Metric(const std::string& line_start) {
    std::string body = Call("GET", "/metrics").body;
    auto at = body.find("\n" + line_start + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(body.substr(at + line_start.size() + 2));
  }
  Lease Acquire() {
    auto lease = locks_->TryAcquire("lock", std::chrono::seconds(60));
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    return lease.ok() ? *lease : Lease{};
  }
  static void ExpectError(const RawResponse& r, int status, const std::string& error) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(boost::json::parse(r.body).at("error").as_string(), error) << r.body;
  }

  TempDir dir_;
  testing::RedisServer redis_;
  std::unique_ptr<LockClient> locks_;
  std::unique_ptr<FencedProcess> fenced_;
};

TEST_F(HttpVerifyTest, ForgedHigherTokenIsRefusedRecordedAndCounted) {
  Lease lease = Acquire();
  ASSERT_EQ(Put("k", lease.token).status, 201);
  auto forged = Put("k", FencingToken::FromInt(lease.token.value() + 1'000'000).value());
  ExpectError(forged, 403, "unverified_token");
  EXPECT_EQ(Fence(), lease.token.value());
  EXPECT_EQ(Call("GET", "/v1/objects/k").header("fencing-token"), lease.token.ToString());
  auto history = boost::json::parse(Call("GET", "/v1/history").body).at("decisions").as_array();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].at("reason").as_string(), "unverified_token");
  EXPECT_FALSE(history[1].at("accepted").as_bool());
  EXPECT_EQ(Metric("fenced_writes_refused_total{reason=\"unverified_token\"}"), 1);
}

TEST_F(HttpVerifyTest, HolderWritesManyTimesWithOneCallToTheLockService) {
  Lease lease = Acquire();
  for (int i = 0; i < 10; ++i) {
    auto r = Put("k" + std::to_string(i % 3), lease.token);
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.body;
  }
  EXPECT_EQ(Metric("fenced_verifications_total"), 1);
  EXPECT_EQ(Metric("fenced_writes_accepted_total"), 10);
  // fenced's own lock client, the one that verifies, has its metrics on the same page.
  EXPECT_EQ(Metric("fenced_verify_lock_token_checks_total"), 1);
}

TEST_F(HttpVerifyTest, ConcurrentFirstWritesShareOneCall) {
  Lease lease = Acquire();
  // Paused, Redis holds the verification open while every write arrives.
  redis_.Pause();
  constexpr int kWrites = 8;
  std::vector<std::unique_ptr<RawConnection>> conns;
  for (int i = 0; i < kWrites; ++i) {
    conns.push_back(std::make_unique<RawConnection>(fenced_->port()));
    conns.back()->Send(
        Request("PUT", "/v1/objects/k" + std::to_string(i),
                {{"Fencing-Token", lease.token.ToString()}, {"Fencing-Lock", "lock"}}, "v"));
  }
  EXPECT_TRUE(WaitFor([&] { return Metric("fenced_verifications_total") == 1; }));
  redis_.Resume();
  for (auto& c : conns) EXPECT_EQ(c->Read().status, 201);
  EXPECT_EQ(Metric("fenced_verifications_total"), 1);
}

TEST_F(HttpVerifyTest, LockServiceDownFailsWritesClosed) {
  Lease first = Acquire();
  ASSERT_EQ(Put("k", first.token).status, 201);
  ASSERT_TRUE(locks_->Release(first).ok());
  Lease second = Acquire();
  redis_.Stop();
  ExpectError(Put("k", second.token), 503, "verify_unavailable");
  ExpectError(Put("new", second.token), 503, "verify_unavailable");
  EXPECT_EQ(Fence(), first.token.value());
  EXPECT_EQ(Call("GET", "/v1/objects/new").status, 404);
  auto history = boost::json::parse(Call("GET", "/v1/history").body).at("decisions").as_array();
  EXPECT_EQ(history.size(), 1u);
  EXPECT_EQ(Metric("fenced_writes_refused_total{reason=\"verify_unavailable\"}"), 2);
  EXPECT_GE(Metric("fenced_verify_failures_total"), 1);
}

TEST(FencedFlagsTest, FailsToStartWhenTheVerifyingLockServiceCannotBeOpened) {
  TempDir dir;
  auto r = testing::RunCommand({testing::FencedBinary(), "--db", dir.File("s.db"), "--listen",
                                "127.0.0.1:0", "--verify-with",
                                "redis://127.0.0.1:" + std::to_string(testing::FreePort())});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--verify-with"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot open the lock service"), std::string::npos) << r.err;
}

TEST(FencedFlagsTest, MalformedLockForIsAClearError) {
  TempDir dir;
  for (std::string bad : {"no-equals", "prefix="}) {
    auto r = testing::RunCommand({testing::FencedBinary(), "--db", dir.File("s.db"), "--listen",
                                  "127.0.0.1:0", "--lock-for", bad});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("PREFIX=LOCK"), std::string::npos) << r.err;
  }
}

TEST(FencedFlagsTest, APrefixBoundTwiceIsAClearError) {
  TempDir dir;
  auto r = testing::RunCommand({testing::FencedBinary(), "--db", dir.File("s.db"), "--listen",
                                "127.0.0.1:0", "--lock-for", "a/=one", "--lock-for", "a/=two"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("twice"), std::string::npos) << r.err;
}

TEST(FencedFlagsTest, AVerifyingServicesPasswordIsNotPrinted) {
  TempDir dir;
  auto r = testing::RunCommand({testing::FencedBinary(), "--db", dir.File("s.db"), "--listen",
                                "127.0.0.1:0", "--verify-with",
                                "redis://:hunter2@127.0.0.1:" +
                                    std::to_string(testing::FreePort())});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("redis://:***@127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
}

TEST(FencedFlagsTest, LockForAndRequireServiceApplyToWrites) {
  TempDir dir;
  FencedProcess fenced(dir.File("s.db"),
                       {"--lock-for", "a/=alock", "--lock-for", "b/=block", "--require-service"});
  auto put = [&](const std::string& key, std::vector<std::pair<std::string, std::string>> h) {
    RawConnection c(fenced.port());
    h.emplace_back("Fencing-Token", "1");
    c.Send(Request("PUT", "/v1/objects/" + key, h, "v"));
    return c.Read();
  };
  EXPECT_EQ(put("a%2Fx", {{"Fencing-Lock", "alock"}}).status, 400);  // no service
  auto wrong = put("b%2Fx", {{"Fencing-Lock", "alock"}, {"Fencing-Service", "redis:1"}});
  EXPECT_EQ(wrong.status, 409);
  EXPECT_EQ(boost::json::parse(wrong.body).at("lock").as_string(), "block");
  EXPECT_EQ(put("b%2Fx", {{"Fencing-Lock", "block"}, {"Fencing-Service", "redis:1"}}).status, 201);
}

}  // namespace
}  // namespace fencekit
