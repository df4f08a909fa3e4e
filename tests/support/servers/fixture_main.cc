// The servers one ctest run shares (tests/CMakeLists.txt: FIXTURES_SETUP and FIXTURES_CLEANUP):
// one PostgreSQL and one MariaDB, each started before the first test that needs it and stopped
// after the last, instead of one per test process.
//
//   fencekit_test_fixture postgres start DIR   starts it (a copy of the template cluster, see
//                                              support/servers/store_engines.h), returns once it is
//                                              ready; DIR/uri then holds its URI
//   fencekit_test_fixture mariadb start DIR    the same for MariaDB; DIR/port holds its port
//   fencekit_test_fixture KIND stop DIR        stops it and removes DIR
//
// Tests find DIR in $FENCEKIT_TEST_POSTGRES or $FENCEKIT_TEST_MARIADB (set by ctest on the
// tests that require the fixture); a test run without it starts a server of its own. The server
// is kept by a keeper process (DIR/keeper.pid) that stops it on `stop`, or on its own once the
// ctest that started it is gone, so an interrupted run leaves no server behind.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "fencekit/procutil/mariadb_server.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using fencekit::Status;
using fencekit::testing::ReadWholeFile;

constexpr std::chrono::seconds kStopTimeout{60};

bool WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return !ec;
}

// True while process `pid` exists (EPERM: it exists, owned by someone else).
bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Reports on `ready_fd`, then waits for SIGTERM/SIGINT (blocked by the caller) or until
// `watched` (the ctest process) is gone.
void ReadyThenHold(int ready_fd, pid_t watched, const sigset_t& stop) {
  (void)!::write(ready_fd, "ok", 2);
  ::close(ready_fd);
  timespec second{1, 0};
  while (sigtimedwait(&stop, nullptr, &second) < 0 && Alive(watched)) {
  }
}

// Starts the `kind` server in `data`, writes what tests need to find it into DIR, reports on
// `ready_fd` ("ok" or nothing), then holds it until SIGTERM/SIGINT or until `watched` is gone;
// stops it and says so by removing DIR/keeper.pid. Returns the keeper's exit code.
int Serve(const std::string& kind, const fs::path& dir, int ready_fd, pid_t watched,
          const fencekit::testing::TempDir& data) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  const bool own_pid = WriteAtomically(dir / "keeper.pid", std::to_string(::getpid()) + "\n");
  int code = 1;
  if (!own_pid) {
    std::cerr << "fencekit_test_fixture: cannot write into " << dir << "\n";
  } else if (kind == "postgres") {
    fencekit::procutil::PostgresServer server;
    Status s = fencekit::testing::StartPostgresFromTemplate(server, data.File("pg"));
    if (!s.ok()) {
      std::cerr << "fencekit_test_fixture: PostgreSQL did not start: " << s.ToString() << "\n";
    } else if (!WriteAtomically(dir / "uri", server.uri("") + "\n")) {
      std::cerr << "fencekit_test_fixture: cannot write into " << dir << "\n";
    } else {
      ReadyThenHold(ready_fd, watched, stop);
      // Immediate shutdown: the run's databases are thrown away, so the shutdown checkpoint
      // of a fast one (a minute, with a run's hundred databases on a busy disk) buys nothing.
      server.process().Signal(SIGQUIT);
      server.process().Wait();
      code = 0;
    }
  } else {
    fencekit::procutil::MariadbServer server;
    Status s = server.Start({.data_dir = data.File("mariadb")});
    if (!s.ok()) {
      std::cerr << "fencekit_test_fixture: MariaDB did not start: " << s.ToString() << "\n";
    } else if (!WriteAtomically(dir / "port", std::to_string(server.port()) + "\n")) {
      std::cerr << "fencekit_test_fixture: cannot write into " << dir << "\n";
    } else {
      ReadyThenHold(ready_fd, watched, stop);
      server.process().Signal(SIGKILL);  // the run's databases are thrown away
      server.process().Wait();
      code = 0;
    }
  }
  std::error_code ec;
  fs::remove(dir / "uri", ec);
  fs::remove(dir / "port", ec);
  fs::remove(dir / "keeper.pid", ec);  // `stop` waits for this
  return code;
}

// The keeper process: detached from ctest, it serves, then removes the cluster's folder (after
// `stop` has returned: a run's databases are many files) and exits.
[[noreturn]] void Keep(const std::string& kind, const fs::path& dir, int ready_fd, pid_t watched) {
  ::setsid();  // out of ctest's process group: a test's timeout kill does not reach it
  int log = ::open((dir / "keeper.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  int null = ::open("/dev/null", O_RDONLY);
  // ctest reads the test's stdout and stderr to their end: the keeper must not hold them.
  ::dup2(null, 0);
  ::dup2(log, 1);
  ::dup2(log, 2);
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != ready_fd) ::close(fd);
  }
  int code;
  {
    // Under $TMPDIR, whose path is short enough for the server's socket's name.
    fencekit::testing::TempDir data;
    code = Serve(kind, dir, ready_fd, watched, data);
  }
  std::_Exit(code);
}

int Start(const std::string& kind, const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "fencekit_test_fixture: cannot make " << dir << ": " << ec.message() << "\n";
    return 1;
  }
  int ready[2];
  if (::pipe(ready) != 0) return 1;
  const pid_t ctest = ::getppid();
  pid_t keeper = ::fork();
  if (keeper < 0) return 1;
  if (keeper == 0) {
    ::close(ready[0]);
    Keep(kind, dir, ready[1], ctest);
  }
  ::close(ready[1]);
  char answer[2] = {};
  ssize_t n;
  while ((n = ::read(ready[0], answer, sizeof answer)) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  if (n != 2 || std::memcmp(answer, "ok", 2) != 0) {
    std::cerr << ReadWholeFile(dir / "keeper.log");
    return 1;
  }
  if (kind == "postgres") {
    std::cout << "PostgreSQL for this ctest run: " << ReadWholeFile(dir / "uri");
  } else {
    std::cout << "MariaDB for this ctest run on port " << ReadWholeFile(dir / "port");
  }
  return 0;
}

int Stop(const fs::path& dir) {
  const std::string pid_text = ReadWholeFile(dir / "keeper.pid");
  if (!pid_text.empty()) {
    const pid_t pid = std::stoi(pid_text);
    ::kill(pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
    while (fs::exists(dir / "keeper.pid") && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (fs::exists(dir / "keeper.pid")) {
      std::cerr << "fencekit_test_fixture: the keeper (pid " << pid << ") did not stop within "
                << kStopTimeout.count() << "s; its log:\n"
                << ReadWholeFile(dir / "keeper.log");
      return 1;
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: fencekit_test_fixture postgres|mariadb start|stop DIR\n";
  if (argc != 4 || (std::string(argv[1]) != "postgres" && std::string(argv[1]) != "mariadb")) {
    std::cerr << usage;
    return 64;
  }
  const std::string kind = argv[1], command = argv[2];
  const fs::path dir = fs::absolute(argv[3]);
  if (command == "start") return Start(kind, dir);
  if (command == "stop") return Stop(dir);
  std::cerr << usage;
  return 64;
}
