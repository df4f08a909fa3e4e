// power_loss_sweep: cuts a seeded store-and-lock workload by a power loss at N points and
// prints what the disk kept that it should not have lost (docs/reliability.md).
//   power_loss_sweep --points N --mode drop|torn --durability full|normal --seed S
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "support/faults/power_loss.h"

int main(int argc, char** argv) {
  fencekit::testing::PowerLossOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--points") {
      o.points = std::atoi(value.c_str());
    } else if (flag == "--mode" && (value == "drop" || value == "torn")) {
      o.loss = value == "drop" ? fencekit::testing::FaultVfs::Loss::kDrop
                               : fencekit::testing::FaultVfs::Loss::kTorn;
    } else if (flag == "--durability" && (value == "full" || value == "normal")) {
      o.durability = value == "full" ? fencekit::Durability::kFull : fencekit::Durability::kNormal;
    } else if (flag == "--seed") {
      o.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else {
      std::cerr << "usage: power_loss_sweep [--points N] [--mode drop|torn] "
                   "[--durability full|normal] [--seed S]\n";
      return 2;
    }
  }
  if (argc % 2 == 0 || o.points <= 0) {
    std::cerr << "usage: power_loss_sweep [--points N] [--mode drop|torn] "
                 "[--durability full|normal] [--seed S]\n";
    return 2;
  }
  auto report = fencekit::testing::RunPowerLossSweep(o);
  std::cout << report.Line() << "\n";
  return report.acked_lost + report.fence_regressions + report.token_regressions +
                     report.integrity_failures ==
                 0
             ? 0
             : 1;
}
