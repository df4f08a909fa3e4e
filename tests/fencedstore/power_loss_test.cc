// The power-loss sweep (a soak: 150 losses per mode at full length, a few in the default ladder's
// short arm; the long runs are in docs/reliability.md): no acknowledged write, fence or grant is
// lost in either loss mode, and the control (the store at durability normal, whose commits are
// not synced) shows that the harness sees a loss.
#include "support/faults/power_loss.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace fencekit::testing {
namespace {

// Power losses in `loss` mode lose nothing acknowledged.
void ExpectNoLoss(FaultVfs::Loss loss, std::uint64_t seed) {
  const int points = SoakLength(20, 150);
  auto r = RunPowerLossSweep({.points = points, .loss = loss, .seed = seed});
  ::testing::Test::RecordProperty("report", r.Line());
  EXPECT_EQ(r.points, points);
  EXPECT_EQ(r.acked_lost, 0) << r.Line();
  EXPECT_EQ(r.fence_regressions, 0) << r.Line();
  EXPECT_EQ(r.token_regressions, 0) << r.Line();
  EXPECT_EQ(r.integrity_failures, 0) << r.Line();
}

TEST(PowerLossSoak, DropModeLosesNothingAcknowledged) { ExpectNoLoss(FaultVfs::Loss::kDrop, 17); }

TEST(PowerLossSoak, TornModeLosesNothingAcknowledged) { ExpectNoLoss(FaultVfs::Loss::kTorn, 29); }

TEST(PowerLossSoak, TheControlWithUnsyncedCommitsShowsLosses) {
  auto r = RunPowerLossSweep({.points = SoakLength(10, 40),
                              .loss = FaultVfs::Loss::kDrop,
                              .durability = Durability::kNormal,
                              .seed = 5});
  RecordProperty("report", r.Line());
  EXPECT_GT(r.acked_lost, 0) << "the harness saw no loss where one must happen: " << r.Line();
}

}  // namespace
}  // namespace fencekit::testing
