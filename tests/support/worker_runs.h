// The summary line of `fencectl pause-test --worker`, for the tests that run it.
#pragma once

#include <string>
#include <vector>

namespace fencekit::testing {

// What `fencectl pause-test --worker` printed as its last stdout line, "pause-runs: runs=R
// failed_runs=F expired_leases=E operations=O", with its exit code. A missing line fails the
// test (and leaves the counts at -1), as does an exit code other than 4 with failed runs or 0
// without.
struct WorkerRuns {
  int exit_code = -1;
  int runs = -1, failed_runs = -1, expired = -1, operations = -1;
  std::string err;  // its stderr
};
WorkerRuns ParseWorkerRuns(int exit_code, const std::string& out, const std::string& err);

// The environment of pausetest/examples/counter-postgres.py on `database_url`: `work_seconds`
// between its read and its write, the guard loaded from `guard_sql` by postgres-setup.sh, and
// FENCING=off (the control arm) unless `fencing`.
std::vector<std::string> PostgresWorkerEnv(const std::string& database_url,
                                           const std::string& work_seconds, bool fencing,
                                           const std::string& guard_sql);

}  // namespace fencekit::testing
