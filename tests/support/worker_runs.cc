#include "support/worker_runs.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/matching.h"

namespace fencekit::testing {

std::vector<std::string> PostgresWorkerEnv(const std::string& database_url,
                                           const std::string& work_seconds, bool fencing,
                                           const std::string& guard_sql) {
  std::vector<std::string> env = {"DATABASE_URL=" + database_url, "WORK_SECONDS=" + work_seconds,
                                  "FENCEKIT_GUARD_SQL=" + guard_sql};
  if (!fencing) env.push_back("FENCING=off");
  return env;
}

WorkerRuns ParseWorkerRuns(int exit_code, const std::string& out, const std::string& err) {
  WorkerRuns s;
  s.exit_code = exit_code;
  s.err = err;
  const std::vector<std::string> m = Search(
      out, R"(pause-runs: runs=(\d+) failed_runs=(\d+) expired_leases=(\d+) operations=(\d+)\n$)");
  EXPECT_FALSE(m.empty()) << "stdout: " << out << "\nstderr: " << err;
  if (!m.empty()) {
    s.runs = std::stoi(m[1]);
    s.failed_runs = std::stoi(m[2]);
    s.expired = std::stoi(m[3]);
    s.operations = std::stoi(m[4]);
  }
  EXPECT_EQ(exit_code, s.failed_runs > 0 ? 4 : 0) << err;
  return s;
}

}  // namespace fencekit::testing
