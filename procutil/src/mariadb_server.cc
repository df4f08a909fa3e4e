#include "fencekit/procutil/mariadb_server.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "fencekit/procutil/loopback.h"
#include "server_user.h"

namespace fencekit::procutil {
namespace {

namespace fs = std::filesystem;

// What `path` holds from byte `from` on ("" when it is shorter or missing).
std::string ReadFrom(const std::string& path, std::uintmax_t from) {
  std::ifstream in(path);
  in.seekg(static_cast<std::streamoff>(from));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::uintmax_t FileSize(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

}  // namespace

std::vector<std::string> MariadbClientArgv(std::uint16_t port, const std::string& database) {
  // A bounded connect: a server that accepts but never answers fails the client, not hangs it.
  std::vector<std::string> argv = {"mariadb",     "--no-defaults",      "--connect-timeout=30",
                                   "-h",          "127.0.0.1",          "-P",
                                   std::to_string(port), "-u",          MariadbServer::kUser};
  if (!database.empty()) argv.push_back(database);
  return argv;
}

std::vector<std::string> MariadbServer::AsServerUser(const std::string& program) const {
  std::vector<std::string> argv;
  // setpriv execs the program in place (same pid), unlike runuser and su, which fork.
  if (as_mysql_user_) argv = {"setpriv", "--reuid=mysql", "--regid=mysql", "--init-groups", "--"};
  argv.push_back(program);
  return argv;
}

std::vector<std::string> MariadbServer::ClientArgv(const std::string& database) const {
  return MariadbClientArgv(port_, database);
}

Status MariadbServer::Start(MariadbOptions options) {
  options_ = std::move(options);
  if (options_.data_dir.empty()) {
    return Status::InvalidArgument("MariadbOptions::data_dir is empty; give the server a folder");
  }
  fs::path dir = fs::absolute(options_.data_dir);
  options_.data_dir = dir.string();
  if (options_.log_path.empty()) options_.log_path = dir.string() + ".log";
  if (!fs::exists(options_.server_binary) || !fs::exists(options_.install_db_binary)) {
    return Status::Unavailable("no MariaDB server at " + options_.server_binary +
                               " (install mariadb-server)");
  }
  as_mysql_user_ = ::geteuid() == 0;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot make " + dir.string() + ": " + ec.message());
  // Its own temporary folder, beside the data folder: servers (and mariadb-install-db runs)
  // started at once must not share /tmp's temporary tables.
  tmp_dir_ = dir.string() + ".tmp";
  fs::create_directories(tmp_dir_, ec);
  if (ec) return Status::Unavailable("cannot make " + tmp_dir_ + ": " + ec.message());
  // Beside the data folder: the server runs it at every start, before accepting connections.
  init_file_ = dir.string() + ".init.sql";
  {
    std::ofstream init(init_file_, std::ios::trunc);
    for (const char* host : {"127.0.0.1", "localhost"}) {
      init << "CREATE USER IF NOT EXISTS '" << kUser << "'@'" << host << "';\n"
           << "GRANT ALL PRIVILEGES ON *.* TO '" << kUser << "'@'" << host << "';\n";
    }
    if (!init) return Status::Unavailable("cannot write " + init_file_);
  }
  ::chmod(init_file_.c_str(), 0644);
  if (as_mysql_user_) {
    if (Status s = GiveFoldersTo("mysql", "MariaDB", "mariadb-server", {dir, tmp_dir_}); !s.ok()) {
      return s;
    }
  }
  if (!fs::exists(dir / "mysql")) {
    if (Status s = InstallDb(); !s.ok()) return s;
  }
  return StartOnLoopbackPort(options_.port, &port_, [this](bool* taken) { return StartOn(taken); });
}

Status MariadbServer::InstallDb() {
  std::vector<std::string> argv = AsServerUser(options_.install_db_binary);
  for (std::string arg :
       {std::string("--no-defaults"), "--datadir=" + options_.data_dir, "--tmpdir=" + tmp_dir_,
        std::string("--auth-root-authentication-method=normal"), std::string("--skip-test-db")}) {
    argv.push_back(std::move(arg));
  }
  // It fsyncs the system tables it makes: slow on a busy disk, never endless.
  return RunToEnd(argv, options_.log_path, 4 * options_.start_timeout, "install mariadb-server",
                  "mariadb-install-db for " + options_.data_dir);
}

Status MariadbServer::StartOn(bool* port_taken) {
  std::vector<std::string> argv = AsServerUser(options_.server_binary);
  // --no-defaults must come first; name resolution off, so that 127.0.0.1 matches the user.
  for (std::string arg :
       {std::string("--no-defaults"), "--datadir=" + options_.data_dir, "--tmpdir=" + tmp_dir_,
        "--port=" + std::to_string(port_), std::string("--bind-address=127.0.0.1"),
        "--socket=" + options_.data_dir + "/mariadbd.sock",
        "--pid-file=" + options_.data_dir + "/mariadbd.pid", std::string("--skip-name-resolve"),
        "--init-file=" + init_file_}) {
    argv.push_back(std::move(arg));
  }
  for (const auto& setting : options_.settings) argv.push_back(setting);
  // Only what this start logs counts: the log is appended to across starts.
  std::uintmax_t log_start = FileSize(options_.log_path);
  if (Status s = process_.Start({.argv = argv, .output_path = options_.log_path}); !s.ok()) {
    return Status::Unavailable("cannot start mariadbd: " + s.message());
  }
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = ReadFrom(options_.log_path, log_start);
    if (log.find("ready for connections") != std::string::npos &&
        log.find("port: " + std::to_string(port_)) != std::string::npos) {
      return Status::Ok();
    }
    if (process_.Exited()) {
      *port_taken = log.find("already in use") != std::string::npos ||
                    log.find("another server running on port") != std::string::npos;
      return Status::Unavailable("mariadbd exited at start on port " + std::to_string(port_) +
                                 "; its output:\n" + process_.OutputTail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return Status::Unavailable("mariadbd was not ready on port " + std::to_string(port_) +
                             " within " + std::to_string(options_.start_timeout.count()) +
                             "ms; its output:\n" + process_.OutputTail());
}

void MariadbServer::Stop() {
  // SIGTERM: a clean shutdown; SIGKILL past the timeout, a crash InnoDB recovers from.
  process_.Stop(SIGTERM, options_.start_timeout);
}

}  // namespace fencekit::procutil
