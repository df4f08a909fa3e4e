// The power-loss sweep's short arm for CI (the long runs are in docs/reliability.md): no
// acknowledged write, fence or grant is lost in either loss mode, and the control (the store at
// durability normal, whose commits are not synced) shows that the harness sees a loss.
#include "support/power_loss.h"

#include <gtest/gtest.h>

namespace fencekit::testing {
namespace {

// 150 power losses in `loss` mode lose nothing acknowledged.
void ExpectNoLoss(FaultVfs::Loss loss, std::uint64_t seed) {
  auto r = RunPowerLossSweep({.points = 150, .loss = loss, .seed = seed});
  ::testing::Test::RecordProperty("report", r.Line());
  EXPECT_EQ(r.points, 150);
  EXPECT_EQ(r.acked_lost, 0) << r.Line();
  EXPECT_EQ(r.fence_regressions, 0) << r.Line();
  EXPECT_EQ(r.token_regressions, 0) << r.Line();
  EXPECT_EQ(r.integrity_failures, 0) << r.Line();
}

TEST(PowerLossTest, DropModeLosesNothingAcknowledged) { ExpectNoLoss(FaultVfs::Loss::kDrop, 17); }

TEST(PowerLossTest, TornModeLosesNothingAcknowledged) { ExpectNoLoss(FaultVfs::Loss::kTorn, 29); }

TEST(PowerLossTest, TheControlWithUnsyncedCommitsShowsLosses) {
  auto r = RunPowerLossSweep(
      {.points = 40, .loss = FaultVfs::Loss::kDrop, .durability = Durability::kNormal, .seed = 5});
  RecordProperty("report", r.Line());
  EXPECT_GT(r.acked_lost, 0) << "the harness saw no loss where one must happen: " << r.Line();
}

}  // namespace
}  // namespace fencekit::testing
