// The guard as a Redis 7 function library (fencedstore/lua/fencekit.lua) on a real
// redis-server: a stale token is refused with a FENCE error and changes nothing, bad calls are
// refused, tokens compare exactly up to 2^63-1, and racing first advances end at the highest.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/servers/redis_server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

std::string Library() {
  std::ifstream in(std::string(GUARD_LUA_DIR) + "/fencekit.lua");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One reply: an error's text in `error`, else a string, status or integer's text in `text`
// (nil: empty, `nil` true).
struct Reply {
  bool ok = false;  // false: an error reply, or no reply at all
  bool nil = false;
  std::string text, error;
};

// One hiredis connection to 127.0.0.1:port.
class Conn {
 public:
  explicit Conn(std::uint16_t port) {
    timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c_ != nullptr && c_->err == 0) redisSetTimeout(c_, tv);
  }
  ~Conn() {
    if (c_ != nullptr) redisFree(c_);
  }
  bool ok() const { return c_ != nullptr && c_->err == 0; }

  Reply Run(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply out;
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) {
      out.error = "no reply";
      return out;
    }
    switch (r->type) {
      case REDIS_REPLY_ERROR:
        out.error.assign(r->str, r->len);
        break;
      case REDIS_REPLY_NIL:
        out.ok = out.nil = true;
        break;
      case REDIS_REPLY_INTEGER:
        out.ok = true;
        out.text = std::to_string(r->integer);
        break;
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        out.ok = true;
        out.text.assign(r->str, r->len);
        break;
      default:
        out.ok = true;
    }
    freeReplyObject(r);
    return out;
  }

 private:
  redisContext* c_ = nullptr;
};

class RedisGuardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::RedisServer();
    Conn c(server_->port());
    ASSERT_TRUE(c.ok());
    Reply r = c.Run({"FUNCTION", "LOAD", "REPLACE", Library()});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.text, "fencekit");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(conn_.ok()); }

  Reply Advance(const std::string& fence, const std::string& token) {
    return conn_.Run({"FCALL", "fencekit_advance", "1", fence, token});
  }
  Reply Set(const std::string& fence, const std::string& data, const std::string& token,
            const std::string& value) {
    return conn_.Run({"FCALL", "fencekit_set", "2", fence, data, token, value});
  }
  Reply Del(const std::string& fence, const std::string& data, const std::string& token) {
    return conn_.Run({"FCALL", "fencekit_del", "2", fence, data, token});
  }
  std::string Get(const std::string& key) {
    Reply r = conn_.Run({"GET", key});
    EXPECT_TRUE(r.ok) << r.error;
    return r.nil ? "(nil)" : r.text;
  }

  static testing::RedisServer* server_;
  Conn conn_{server_->port()};
};

testing::RedisServer* RedisGuardTest::server_ = nullptr;

TEST_F(RedisGuardTest, StaleTokenRefusedWithFenceErrorAndNothingChanged) {
  ASSERT_EQ(Set("{a}f", "{a}d", "7", "seven").text, "7");
  Reply r = Set("{a}f", "{a}d", "4", "four");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "FENCE stale token 4 for fence key \"{a}f\": the highest is 7");
  r = Del("{a}f", "{a}d", "6");
  EXPECT_EQ(r.error, "FENCE stale token 6 for fence key \"{a}f\": the highest is 7");
  r = Advance("{a}f", "1");
  EXPECT_EQ(r.error, "FENCE stale token 1 for fence key \"{a}f\": the highest is 7");
  EXPECT_EQ(Get("{a}f"), "7");
  EXPECT_EQ(Get("{a}d"), "seven");
}

TEST_F(RedisGuardTest, EqualAndHigherTokensAccepted) {
  EXPECT_EQ(Advance("{b}f", "5").text, "5");
  EXPECT_EQ(Set("{b}f", "{b}d", "5", "x").text, "5");  // one holder, many writes
  EXPECT_EQ(Set("{b}f", "{b}d", "5", "y").text, "5");
  EXPECT_EQ(Get("{b}d"), "y");
  EXPECT_EQ(Set("{b}f", "{b}d", "12", "z").text, "12");
  EXPECT_EQ(Get("{b}f"), "12");
  EXPECT_EQ(Get("{b}d"), "z");
}

TEST_F(RedisGuardTest, DelIsGuarded) {
  ASSERT_TRUE(Set("{c}f", "{c}d", "3", "v").ok);
  EXPECT_FALSE(Del("{c}f", "{c}d", "2").ok);
  EXPECT_EQ(Get("{c}d"), "v");
  EXPECT_EQ(Del("{c}f", "{c}d", "4").text, "4");
  EXPECT_EQ(Get("{c}d"), "(nil)");
  EXPECT_EQ(Get("{c}f"), "4");
  // A del of an absent key under a new fence creates the fence.
  EXPECT_EQ(Del("{c2}f", "{c2}d", "9").text, "9");
  EXPECT_EQ(Get("{c2}f"), "9");
}

// Compared as doubles, 2^53+1 and 2^53 are equal and 2^63-1 rounds to 2^63.
TEST_F(RedisGuardTest, LargeTokensCompareExactly) {
  ASSERT_TRUE(Advance("{e}f", "9007199254740993").ok);
  EXPECT_EQ(Advance("{e}f", "9007199254740992").error,
            "FENCE stale token 9007199254740992 for fence key \"{e}f\": the highest is "
            "9007199254740993");
  EXPECT_TRUE(Advance("{e}f", "9007199254740994").ok);
  EXPECT_TRUE(Advance("{e}f", "10000000000000000").ok);  // a longer string is higher
  EXPECT_TRUE(Set("{e}f", "{e}d", "9223372036854775806", "a").ok);
  EXPECT_EQ(Set("{e}f", "{e}d", "9223372036854775807", "b").text, "9223372036854775807");
  EXPECT_EQ(Set("{e}f", "{e}d", "9223372036854775807", "c").text, "9223372036854775807");
  EXPECT_FALSE(Set("{e}f", "{e}d", "9223372036854775806", "d").ok);
  EXPECT_EQ(Get("{e}d"), "c");
  EXPECT_EQ(Get("{e}f"), "9223372036854775807");
}

TEST_F(RedisGuardTest, BadCallsRefusedAndNothingChanged) {
  ASSERT_TRUE(Set("{g}f", "{g}d", "5", "v").ok);
  const std::vector<std::vector<std::string>> calls = {
      {"fencekit_advance", "0"},                        // no key
      {"fencekit_advance", "1", "{g}f"},                // no token
      {"fencekit_advance", "1", "{g}f", "6", "extra"},  // an extra argument
      {"fencekit_advance", "2", "{g}f", "{g}d", "6"},   // an extra key
      {"fencekit_set", "2", "{g}f", "{g}d", "6"},       // no value
      {"fencekit_set", "2", "{g}f", "{g}d", "6", "w", "x"},
      {"fencekit_set", "1", "{g}f", "6", "w"},          // no data key
      {"fencekit_set", "2", "{g}f", "{g}f", "6", "w"},  // the same key twice
      {"fencekit_del", "2", "{g}f", "{g}d"},            // no token
      {"fencekit_del", "2", "{g}f", "{g}d", "6", "x"},
  };
  for (const auto& call : calls) {
    std::vector<std::string> args = {"FCALL"};
    args.insert(args.end(), call.begin(), call.end());
    Reply r = conn_.Run(args);
    EXPECT_FALSE(r.ok) << call[0] << " " << call[1];
    EXPECT_EQ(r.error.rfind("ERR fencekit: ", 0), 0u) << r.error;
  }
  for (std::string token :
       {"", "abc", "0", "-1", "+6", "06", " 6", "6 ", "6.0", "1e3", "0x10", "9223372036854775808",
        "18446744073709551616", "99999999999999999999"}) {
    Reply r = Set("{g}f", "{g}d", token, "w");
    EXPECT_EQ(r.error.rfind("ERR fencekit: the token must be", 0), 0u)
        << "token '" << token << "': " << r.error;
    r = Advance("{g}f", token);
    EXPECT_EQ(r.error.rfind("ERR fencekit: the token must be", 0), 0u) << r.error;
  }
  EXPECT_EQ(Get("{g}f"), "5");
  EXPECT_EQ(Get("{g}d"), "v");
}

TEST_F(RedisGuardTest, FenceKeyHoldingSomethingElseRefused) {
  ASSERT_TRUE(conn_.Run({"SET", "{h}f", "007"}).ok);
  EXPECT_EQ(Set("{h}f", "{h}d", "9", "v").error,
            "ERR fencekit: the fence key \"{h}f\" does not hold a token");
  ASSERT_TRUE(conn_.Run({"LPUSH", "{h}l", "1"}).ok);
  EXPECT_EQ(Set("{h}l", "{h}d", "9", "v").error.rfind("WRONGTYPE", 0), 0u);
  EXPECT_EQ(Get("{h}d"), "(nil)");
}

// Several connections race on new fences: the fence ends at the highest token, and every
// refusal is of a token below the highest it names.
TEST_F(RedisGuardTest, ConcurrentFirstAdvancesEndAtTheHighest) {
  constexpr int kThreads = 6, kRounds = 200;
  std::atomic<int> bad{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Conn c(server_->port());
      if (!c.ok()) {
        ++bad;
        return;
      }
      for (int round = 0; round < kRounds; ++round) {
        std::string fence = "{race-" + std::to_string(round) + "}f";
        std::string token = std::to_string(100 * round + t + 1);
        Reply r = c.Run({"FCALL", "fencekit_set", "2", fence,
                         "{race-" + std::to_string(round) + "}d", token, token});
        if (r.ok) continue;
        ++refused;
        auto at = r.error.rfind(' ');
        if (r.error.rfind("FENCE stale token " + token + " ", 0) != 0 || at == std::string::npos ||
            std::stoll(r.error.substr(at + 1)) <= std::stoll(token)) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  for (int round = 0; round < kRounds; ++round) {
    std::string highest = std::to_string(100 * round + kThreads);
    EXPECT_EQ(Get("{race-" + std::to_string(round) + "}f"), highest);
    EXPECT_EQ(Get("{race-" + std::to_string(round) + "}d"), highest);  // the last write won
  }
  EXPECT_GT(refused.load(), 0);  // the connections did race
}

TEST_F(RedisGuardTest, LoadingAgainIsHarmless) {
  ASSERT_TRUE(Set("{l}f", "{l}d", "8", "v").ok);
  Reply r = conn_.Run({"FUNCTION", "LOAD", "REPLACE", Library()});
  EXPECT_EQ(r.text, "fencekit") << r.error;
  r = conn_.Run({"FUNCTION", "LOAD", Library()});  // without REPLACE: refused, nothing changes
  EXPECT_NE(r.error.find("already exists"), std::string::npos) << r.error;
  EXPECT_EQ(Get("{l}f"), "8");
  EXPECT_FALSE(Set("{l}f", "{l}d", "7", "w").ok);
  EXPECT_TRUE(Set("{l}f", "{l}d", "8", "w").ok);
}

// The library and the fences are in the append-only file: both survive a SIGKILL.
TEST(RedisGuardPersistenceTest, FenceAndLibrarySurviveARestart) {
  testing::TempDir dir;
  testing::RedisServer server(testing::RedisServer::Persistent(dir.path()));
  {
    Conn c(server.port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Run({"FUNCTION", "LOAD", Library()}).ok);
    ASSERT_TRUE(c.Run({"FCALL", "fencekit_set", "2", "{p}f", "{p}d", "6", "v"}).ok);
  }
  server.RestartKeepingData();
  Conn c(server.port());
  ASSERT_TRUE(c.ok());
  // It answers LOADING until it has read its append-only file.
  ASSERT_TRUE(testing::WaitFor([&] { return c.Run({"PING"}).ok; }));
  EXPECT_EQ(c.Run({"FCALL", "fencekit_set", "2", "{p}f", "{p}d", "5", "w"}).error,
            "FENCE stale token 5 for fence key \"{p}f\": the highest is 6");
  EXPECT_EQ(c.Run({"GET", "{p}d"}).text, "v");
}

}  // namespace
}  // namespace fencekit
