#include "support/servers/shared_mariadb.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fencekit/procutil/mariadb_server.h"
#include "support/test_support.h"

namespace fencekit::testing {
namespace {

// The process's own server, for a test run without the ctest fixture.
struct Own {
  TempDir dir;
  procutil::MariadbServer server;
  Status status = server.Start({.data_dir = dir.File("mariadb")});
};

std::uint16_t Port() {
  if (const char* fixture = std::getenv("FENCEKIT_TEST_MARIADB"); fixture != nullptr) {
    std::ifstream in(std::filesystem::path(fixture) / "port");
    int port = 0;
    if (in >> port && port > 0 && port < 65536) return static_cast<std::uint16_t>(port);
    std::cerr << "no server in the fixture folder " << fixture
              << " ($FENCEKIT_TEST_MARIADB): starting one of this process's own\n";
  }
  static Own own;
  if (!own.status.ok()) {
    ADD_FAILURE() << "MariaDB did not start: " << own.status.ToString();
    return 0;
  }
  return own.server.port();
}

}  // namespace

std::uint16_t SharedMariadbPort() {
  static const std::uint16_t port = Port();
  return port;
}

std::vector<std::string> SharedMariadbClient(const std::string& database) {
  return procutil::MariadbClientArgv(SharedMariadbPort(), database);
}

std::string NewMariadbDatabase(const std::string& prefix) {
  static std::atomic<int> next{0};
  if (SharedMariadbPort() == 0) return "";
  const std::string name = prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(next++);
  std::vector<std::string> argv = SharedMariadbClient();
  argv.insert(argv.end(), {"-e", "CREATE DATABASE " + name});
  auto r = RunCommand(argv);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "CREATE DATABASE " << name << " failed: " << r.err;
    return "";
  }
  return name;
}

}  // namespace fencekit::testing
