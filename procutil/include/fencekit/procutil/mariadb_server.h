// A MariaDB server of its own for a test or a benchmark: mariadb-install-db in a folder,
// mariadbd on a free loopback port with its socket in that folder, stopped with the object.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct MariadbOptions {
  // The server's data folder: made with mariadb-install-db when it holds no database yet. Its
  // path must be short enough for a Unix socket name (about 100 bytes). When this process runs
  // as root, mariadb-install-db and mariadbd run as the `mysql` system user: the folder is
  // given to that user and its parent made traversable (o+x).
  std::string data_dir;
  // 0: a free port; if another process takes it first, Start() tries again with another.
  std::uint16_t port = 0;
  // Where the server's output is appended. Empty: `<data_dir>/../<folder name>.log`.
  std::string log_path;
  // Debian's mariadb-server.
  std::string server_binary = "/usr/sbin/mariadbd";
  std::string install_db_binary = "/usr/bin/mariadb-install-db";
  // Extra server options, "--name=value". The defaults keep acknowledged commits durable
  // (innodb_flush_log_at_trx_commit=1).
  std::vector<std::string> settings;
  std::chrono::milliseconds start_timeout{60'000};
};

// The `mariadb` command-line client on the server at 127.0.0.1:`port` as MariadbServer::kUser
// (reading no option file), in `database` unless it is empty; append "-e SQL", or give SQL on
// stdin. For a server this process did not start (a test run's shared one).
std::vector<std::string> MariadbClientArgv(std::uint16_t port, const std::string& database = "");

// Reads no option file (--no-defaults): only 127.0.0.1 and the socket in the data folder. At
// every start it makes the user `fencekit` (no password, every privilege) on 127.0.0.1 and
// localhost, for clients. Ready once the server logs "ready for connections" after this start.
// Thread safety: not safe for concurrent use.
class MariadbServer {
 public:
  // mariadb-install-db if needed, then starts it and waits until ready. kUnavailable, quoting
  // its output, if it cannot (e.g. mariadb-server is not installed).
  Status Start(MariadbOptions options);
  ~MariadbServer() { Stop(); }

  std::uint16_t port() const { return port_; }
  static constexpr const char* kUser = "fencekit";
  // The `mariadb` command-line client on this server as kUser (reading no option file), in
  // `database` unless it is empty; append "-e SQL", or give SQL on stdin.
  std::vector<std::string> ClientArgv(const std::string& database = "") const;
  ChildProcess& process() { return process_; }

  // Normal shutdown (SIGTERM: running transactions are rolled back, the rest is durable), then
  // waits at most start_timeout before SIGKILL (a crash, which InnoDB recovers from). Does
  // nothing if it is not running.
  void Stop();

 private:
  Status InstallDb();
  Status StartOn(bool* port_taken);
  // {"setpriv", ...mysql user..., "--"} when root, else {}; then `program`.
  std::vector<std::string> AsServerUser(const std::string& program) const;

  MariadbOptions options_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
  bool as_mysql_user_ = false;
  std::string init_file_;
  std::string tmp_dir_;  // its own temporary folder (--tmpdir)
};

}  // namespace fencekit::procutil
