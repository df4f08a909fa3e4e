// kill_sweep: SIGKILLs a real fenced at N seeded moments during concurrent writes, restarting it
// each time on the same database, and prints what it lost (docs/reliability.md).
//   kill_sweep --points N --seed S [--fenced PATH]
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "support/faults/kill_sweep.h"

int main(int argc, char** argv) {
  fencekit::testing::KillSweepOptions o;
  bool bad = argc % 2 == 0;
  for (int i = 1; !bad && i + 1 < argc; i += 2) {
    std::string_view flag = argv[i];
    if (flag == "--points") {
      o.points = std::atoi(argv[i + 1]);
    } else if (flag == "--seed") {
      o.seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--fenced") {
      o.fenced = argv[i + 1];
    } else {
      bad = true;
    }
  }
  if (bad || o.points <= 0) {
    std::cerr << "usage: kill_sweep [--points N] [--seed S] [--fenced PATH]\n";
    return 2;
  }
  auto report = fencekit::testing::RunKillSweep(o);
  std::cout << report.Line() << " (acknowledged " << report.acked << ", of them batches "
            << report.acked_batches << ", failed restarts " << report.start_failures << ")\n";
  int failures =
      report.acked_lost + report.fence_regressions + report.torn_batches + report.start_failures;
  return failures == 0 ? 0 : 1;
}
