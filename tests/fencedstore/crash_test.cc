// Crash durability: a fenced child process is SIGKILLed at seeded moments in the middle of a
// stream of writes from several connections (the kill sweep); after each restart every
// acknowledged write is present and no lock's highest token went down. And SIGTERM stops it
// cleanly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "fencekit/httpapi/store_client.h"
#include "support/faults/kill_sweep.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::TempDir;

TEST(CrashSoak, SigkillAtSeededMomentsLosesNoAcknowledgedWrite) {
  // A soak: 30 kills at full length, a few in the short arm (kill_sweep runs long ones;
  // docs/reliability.md).
  const int points = testing::SoakLength(8, 30);
  auto r = testing::RunKillSweep({.points = points, .seed = 7});
  RecordProperty("report", r.Line());
  EXPECT_EQ(r.points, points) << r.Line();
  EXPECT_EQ(r.start_failures, 0);
  EXPECT_GT(r.acked, 0) << "no write was acknowledged: the sweep tested nothing";
  EXPECT_EQ(r.acked_lost, 0) << r.Line();
  EXPECT_EQ(r.fence_regressions, 0) << r.Line();
  EXPECT_GT(r.acked_batches, 0) << "no batch was acknowledged: atomicity was not tested";
  EXPECT_EQ(r.torn_batches, 0) << r.Line();
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
