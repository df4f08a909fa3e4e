// Crash durability: a fenced child process is SIGKILLed in the middle of a stream of writes from
// several connections; after a restart every acknowledged write is present and no lock's
// highest token went down.
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "fencekit/httpapi/store_client.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::TempDir;

struct Ack {
  std::string value;
  std::int64_t token;
};

TEST(CrashTest, SigkillLosesNoAcknowledgedWrite) {
  TempDir dir;
  std::string db = dir.File("crash.db");
  constexpr int kWriters = 4;
  constexpr int kAcksBeforeKill = 600;

  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Ack> acked;         // key -> what the server acknowledged
  std::map<std::string, std::int64_t> top;  // lock -> highest acknowledged token
  int errors_after_kill = 0;
  {
    FencedProcess fenced(db);
    ASSERT_GT(fenced.port(), 0);
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        auto client = StoreClient::Open(fenced.url(), {.timeout = std::chrono::seconds(5)});
        ASSERT_TRUE(client.ok());
        std::string lock = "lock" + std::to_string(w % 2);  // two writers share each lock
        for (std::int64_t n = 1;; ++n) {
          std::string key = "w" + std::to_string(w) + "-" + std::to_string(n);
          std::string value = "value-" + key;
          std::int64_t token = n * kWriters + w;  // increasing per writer
          auto r = (*client)->Put(lock, FencingToken::FromInt(token).value(), key, value);
          std::lock_guard lock_guard(mu);
          if (r.ok()) {
            acked[key] = {value, token};
            top[lock] = std::max(top[lock], token);
            cv.notify_all();
          } else if (r.status().IsStaleToken()) {
            continue;  // the other writer of this lock is ahead: a refusal, not an ack
          } else {
            ++errors_after_kill;
            return;  // the server is gone
          }
        }
      });
    }
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return acked.size() >= kAcksBeforeKill; });
    }
    fenced.Kill(SIGKILL);  // while writes are in flight on every connection
    int status = fenced.Wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    for (auto& t : writers) t.join();
  }
  EXPECT_EQ(errors_after_kill, kWriters);

  FencedProcess restarted(db);
  auto client = StoreClient::Open(restarted.url());
  ASSERT_TRUE(client.ok());
  for (const auto& [key, ack] : acked) {
    auto got = (*client)->Get(key);
    ASSERT_TRUE(got.ok()) << "acknowledged write of " << key << " was lost: "
                          << got.status().ToString();
    EXPECT_EQ(got->value, ack.value);
    EXPECT_EQ(got->token.value(), ack.token);
  }
  for (const auto& [lock, token] : top) {
    auto highest = (*client)->Highest(lock);
    ASSERT_TRUE(highest.ok() && highest->has_value());
    EXPECT_GE((*highest)->value(), token) << "the fence of " << lock << " went down";
  }
}

TEST(CrashTest, SigtermClosesCleanly) {
  TempDir dir;
  FencedProcess fenced(dir.File("term.db"));
  auto client = StoreClient::Open(fenced.url());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Put("", FencingToken::FromInt(1).value(), "k", "v").ok());
  fenced.Kill(SIGTERM);
  int status = fenced.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << fenced.Output();
  EXPECT_NE(fenced.Output().find("stopped cleanly"), std::string::npos);
}

}  // namespace
}  // namespace fencekit
