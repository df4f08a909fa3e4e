// The MariaDB server a test process shares with the others of its ctest run: the fixture
// fencekit_mariadb (support/servers/fixture_main.cc) started once for the run, instead of one
// mariadb-install-db and server per test process (2-7 s each on two cores).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fencekit::testing {

// A new, empty database on the shared server ("" after a failure, which fails the test), named
// `prefix`_PID_N: unique across the processes sharing the server. The server is the ctest
// run's (its folder in $FENCEKIT_TEST_MARIADB), else one of this process's own, started on first
// use and stopped at exit.
std::string NewMariadbDatabase(const std::string& prefix);

// The shared server's port (0 after a failure, which fails the test).
std::uint16_t SharedMariadbPort();

// The `mariadb` client on the shared server in `database` (procutil::MariadbClientArgv).
std::vector<std::string> SharedMariadbClient(const std::string& database = "");

}  // namespace fencekit::testing
