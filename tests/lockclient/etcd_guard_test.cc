// The etcd guard (fencekit/lockclient/etcd_guard.h) on a real 3-member etcd cluster, started
// once for the suite (each test has keys of its own): one transaction writes the data and raises
// the fence when the token is >= the fence, and writes nothing when it is lower.
#include "fencekit/lockclient/etcd_guard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fencekit/common/text.h"
#include "support/servers/etcd_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::RawConnection;
using testing::Request;

// The range reply's body for `key` through the gateway at `port`.
std::string Range(std::uint16_t port, const std::string& key) {
  RawConnection conn(port);
  conn.Send(Request("POST", "/v3/kv/range", {{"Content-Type", "application/json"}},
                    R"({"key":")" + Base64Encode(key) + R"("})"));
  return conn.Read().body;
}

// Whether `key` holds exactly `value`.
bool Holds(std::uint16_t port, const std::string& key, const std::string& value) {
  return Range(port, key).find(R"("value":")" + Base64Encode(value) + R"(")") != std::string::npos;
}

// The token `n` (a valid one).
FencingToken T(std::int64_t n) { return FencingToken::FromInt(n).value(); }

TEST(EtcdFenceValueTest, TwentyDigitsZeroPadded) {
  EXPECT_EQ(EtcdFenceValue(T(34)), "00000000000000000034");
  EXPECT_EQ(EtcdFenceValue(T(9223372036854775807)), "09223372036854775807");
}

class EtcdGuardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new testing::EtcdCluster(3); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(etcd_->size(), 3);
    auto guard = EtcdGuard::Open(etcd_->uri());
    ASSERT_TRUE(guard.ok()) << guard.status().ToString();
    guard_ = std::move(guard).value();
  }
  // A member's client port: reads through member 0 unless said otherwise (linearizable reads,
  // so any member sees every acknowledged write).
  static std::uint16_t port(int member = 0) { return etcd_->client_port(member); }

  static testing::EtcdCluster* etcd_;
  std::unique_ptr<EtcdGuard> guard_;
};

testing::EtcdCluster* EtcdGuardTest::etcd_ = nullptr;

TEST_F(EtcdGuardTest, LowerTokenRefusedAndNothingWritten) {
  ASSERT_TRUE(guard_->Put("o1/fence", "o1/data", "v34", T(34)).ok());
  EXPECT_TRUE(Holds(port(), "o1/fence", EtcdFenceValue(T(34))));
  Status s = guard_->Put("o1/fence", "o1/data", "v33", T(33));
  EXPECT_EQ(s.code(), StatusCode::kStaleToken);
  EXPECT_EQ(s.message(), "FENCE stale token 33 for fence key \"o1/fence\": the highest is 34");
  EXPECT_TRUE(Holds(port(), "o1/data", "v34"));
  EXPECT_TRUE(Holds(port(), "o1/fence", EtcdFenceValue(T(34))));
}

TEST_F(EtcdGuardTest, EqualAndHigherTokensAccepted) {
  ASSERT_TRUE(guard_->Put("o2/fence", "o2/data", "a", T(9)).ok());
  EXPECT_TRUE(guard_->Put("o2/fence", "o2/data", "b", T(9)).ok());
  EXPECT_TRUE(Holds(port(), "o2/data", "b"));
  // 10 > 9 although "10" < "9" as unpadded strings.
  EXPECT_TRUE(guard_->Put("o2/fence", "o2/data", "c", T(10)).ok());
  EXPECT_TRUE(Holds(port(), "o2/data", "c"));
  EXPECT_EQ(guard_->Put("o2/fence", "o2/data", "d", T(9)).code(), StatusCode::kStaleToken);
  EXPECT_TRUE(guard_->Put("o2/fence", "o2/data", "e", T(9223372036854775807)).ok());
  EXPECT_EQ(guard_->Put("o2/fence", "o2/data", "f", T(9223372036854775806)).code(),
            StatusCode::kStaleToken);
  EXPECT_TRUE(Holds(port(), "o2/data", "e"));
}

TEST_F(EtcdGuardTest, BadArgumentsRefused) {
  EXPECT_EQ(guard_->Put("o3/fence", "o3/fence", "v", T(5)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(guard_->Put("", "o3/data", "v", T(5)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(guard_->Put("o3/fence", "", "v", T(5)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Range(port(), "o3/data").find("kvs"), std::string::npos);
  EXPECT_EQ(Range(port(), "o3/fence").find("kvs"), std::string::npos);
  EXPECT_EQ(EtcdGuard::Open("redis://127.0.0.1:1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdGuard::Open("etcd://").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EtcdGuardTest, DeleteIsGuardedAsAPut) {
  ASSERT_TRUE(guard_->Put("o5/fence", "o5/data", "v7", T(7)).ok());
  // A stale delete leaves the key and the fence alone.
  Status s = guard_->Delete("o5/fence", "o5/data", T(6));
  EXPECT_EQ(s.code(), StatusCode::kStaleToken);
  EXPECT_EQ(s.message(), "FENCE stale token 6 for fence key \"o5/fence\": the highest is 7");
  EXPECT_TRUE(Holds(port(), "o5/data", "v7"));
  // At the fence's token it deletes; above it, it raises the fence too, also for an absent key.
  ASSERT_TRUE(guard_->Delete("o5/fence", "o5/data", T(7)).ok());
  EXPECT_EQ(Range(port(), "o5/data").find("kvs"), std::string::npos);
  ASSERT_TRUE(guard_->Delete("o5/fence", "o5/data", T(8)).ok());
  EXPECT_TRUE(Holds(port(), "o5/fence", EtcdFenceValue(T(8))));
  EXPECT_EQ(guard_->Put("o5/fence", "o5/data", "v7 again", T(7)).code(), StatusCode::kStaleToken);
  EXPECT_EQ(Range(port(), "o5/data").find("kvs"), std::string::npos);
  // Its arguments are checked as Put's.
  EXPECT_EQ(guard_->Delete("o5/fence", "o5/fence", T(9)).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Holds(port(), "o5/fence", EtcdFenceValue(T(8))));
}

// Each guard talks to one member: a write through member 2 raises the fence that member 0's
// client then meets, and every member reads the same fence and data.
TEST_F(EtcdGuardTest, StaleRefusedThroughAnotherMember) {
  auto through2 = EtcdGuard::Open(etcd_->member_uri(2));
  auto through0 = EtcdGuard::Open(etcd_->member_uri(0));
  ASSERT_TRUE(through2.ok() && through0.ok());
  ASSERT_TRUE((*through2)->Put("o4/fence", "o4/data", "new", T(40)).ok());
  Status s = (*through0)->Put("o4/fence", "o4/data", "old", T(39));
  EXPECT_EQ(s.code(), StatusCode::kStaleToken) << s.ToString();
  EXPECT_EQ(s.message(), "FENCE stale token 39 for fence key \"o4/fence\": the highest is 40");
  for (int member = 0; member < 3; ++member) {
    EXPECT_TRUE(Holds(port(member), "o4/data", "new")) << member;
    EXPECT_TRUE(Holds(port(member), "o4/fence", EtcdFenceValue(T(40)))) << member;
  }
}

// A key etcd cannot take: its answer (429, "larger than max") says nothing was written, and a
// retry cannot succeed; the guard says so, not "no answer".
TEST_F(EtcdGuardTest, ARequestTooLargeForEtcdIsABadArgumentAndWritesNothing) {
  // Over etcd's --max-request-bytes (1.5 MiB), and over gRPC's 2 MiB.
  for (std::size_t size : {std::size_t{1'600'000}, std::size_t{2'200'000}}) {
    Status s = guard_->Put("big/fence", "big/data", std::string(size, 'v'), T(5));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << size << ": " << s.ToString();
    EXPECT_NE(s.message().find("nothing was written"), std::string::npos) << s.message();
    EXPECT_EQ(Range(port(), "big/fence").find("\"kvs\""), std::string::npos);
  }
  // A fence key is a fencekit name: refused before anything is sent.
  EXPECT_EQ(guard_->Put(std::string(1025, 'k'), "big/data", "v", T(5)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(guard_->Put("a\nb", "big/data", "v", T(5)).code(), StatusCode::kInvalidArgument);
  // Named safely in a refusal: quotes and bytes beyond ASCII escaped.
  ASSERT_TRUE(guard_->Put("caf\xC3\xA9\"", "q/data", "v", T(9)).ok());
  Status s = guard_->Put("caf\xC3\xA9\"", "q/data", "v", T(8));
  EXPECT_EQ(s.message(),
            "FENCE stale token 8 for fence key \"caf\\xc3\\xa9\\x22\": the highest is 9");
}

// Several threads race on new fences: each ends at the highest token with its write.
TEST_F(EtcdGuardTest, ConcurrentFirstPutsEndAtTheHighest) {
  constexpr int kThreads = 4, kRounds = 20;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::string r = std::to_string(round);
        std::int64_t token = 100 * round + t + 1;
        Status s = guard_->Put("race/" + r + "/fence", "race/" + r + "/data", std::to_string(token),
                               T(token));
        if (!s.ok() && s.code() != StatusCode::kStaleToken) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  for (int round = 0; round < kRounds; ++round) {
    std::string r = std::to_string(round);
    std::int64_t highest = 100 * round + kThreads;
    EXPECT_TRUE(Holds(port(), "race/" + r + "/fence", EtcdFenceValue(T(highest)))) << round;
    EXPECT_TRUE(Holds(port(), "race/" + r + "/data", std::to_string(highest))) << round;
  }
}

}  // namespace
}  // namespace fencekit
