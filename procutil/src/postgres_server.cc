#include "fencekit/procutil/postgres_server.h"

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
#include "fencekit/procutil/proc_stat.h"
#include "server_user.h"

namespace fencekit::procutil {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHint = "install postgresql-15";

// The lines of postmaster.pid: pid, data dir, start time, port, socket dir, listen address,
// shared memory key, status ("ready" once it accepts connections).
std::vector<std::string> PidFileLines(const fs::path& data_dir) {
  std::ifstream in(data_dir / "postmaster.pid");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

void PostgresServer::Kill() {
  const pid_t postmaster = process_.pid();
  if (postmaster > 0) {
    // Each backend would notice the postmaster's death by itself, but one stopped or blocked
    // (on a lock held by a stopped process) never does, and its client would wait on a live
    // connection. Stopped, the postmaster forks nothing while its children are listed.
    ::kill(postmaster, SIGSTOP);
    for (pid_t child : ChildrenOf(postmaster)) ::kill(child, SIGKILL);
  }
  process_.Kill();
}

std::vector<std::string> PostgresServer::AsServerUser(const std::string& program) const {
  std::vector<std::string> argv;
  // setpriv execs the program in place (same pid), unlike runuser and su, which fork.
  if (as_postgres_user_) {
    argv = {"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};
  }
  argv.push_back(options_.bin_dir + "/" + program);
  return argv;
}

std::string PostgresServer::uri(const std::string& dbname) const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + dbname;
}

Status PostgresServer::Start(PostgresOptions options) {
  options_ = std::move(options);
  if (options_.data_dir.empty()) {
    return Status::InvalidArgument("PostgresOptions::data_dir is empty; give the cluster a folder");
  }
  fs::path dir = fs::absolute(options_.data_dir);
  options_.data_dir = dir.string();
  if (options_.log_path.empty()) options_.log_path = dir.string() + ".log";
  if (!fs::exists(options_.bin_dir + "/postgres")) {
    return Status::Unavailable("no PostgreSQL server at " + options_.bin_dir +
                               " (install postgresql-15)");
  }
  as_postgres_user_ = ::geteuid() == 0;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot make " + dir.string() + ": " + ec.message());
  if (as_postgres_user_) {
    if (Status s = GiveFoldersTo("postgres", "PostgreSQL", "postgresql-15", {dir}); !s.ok()) {
      return s;
    }
  }
  if (!fs::exists(dir / "PG_VERSION")) {
    Status made = options_.standby_of_port > 0 ? BaseBackup() : InitDb();
    if (!made.ok()) return made;
  }
  return StartOnLoopbackPort(options_.port, &port_, [this](bool* taken) { return StartOn(taken); });
}

Status PostgresServer::InitDb() {
  std::vector<std::string> argv = AsServerUser("initdb");
  for (const char* arg : {"--auth=trust", "--username=postgres", "--encoding=UTF8",
                          "--locale=C.UTF-8", "--no-instructions", "-D"}) {
    argv.emplace_back(arg);
  }
  argv.push_back(options_.data_dir);
  // initdb fsyncs every file it makes: slow on a busy disk, never endless.
  return RunToEnd(argv, options_.log_path, 4 * options_.start_timeout, kHint, "initdb for " + options_.data_dir);
}

Status PostgresServer::BaseBackup() {
  std::vector<std::string> argv = AsServerUser("pg_basebackup");
  // -R: standby.signal and primary_conninfo; -X stream: the WAL written meanwhile comes along;
  // a fast checkpoint starts the copy at once instead of spreading the primary's I/O.
  for (std::string arg :
       {std::string("-R"), std::string("-X"), std::string("stream"),
        std::string("--checkpoint=fast"), std::string("-h"), std::string("127.0.0.1"),
        std::string("-p"), std::to_string(options_.standby_of_port), std::string("-U"),
        std::string("postgres"), std::string("-D"), options_.data_dir}) {
    argv.push_back(std::move(arg));
  }
  return RunToEnd(argv, options_.log_path, options_.start_timeout, kHint,
                  "pg_basebackup of the primary on port " +
                      std::to_string(options_.standby_of_port) + " into " + options_.data_dir);
}

Status PostgresServer::Promote(std::chrono::seconds timeout) {
  if (process_.pid() < 0) {
    return Status::Unavailable("cannot promote " + options_.data_dir + ": it is not running");
  }
  std::vector<std::string> argv = AsServerUser("pg_ctl");
  for (std::string arg : {std::string("promote"), std::string("-w"), std::string("-t"),
                          std::to_string(timeout.count()), std::string("-D"), options_.data_dir}) {
    argv.push_back(std::move(arg));
  }
  // pg_ctl bounds its own wait; the extra second lets it say why before it is killed.
  return RunToEnd(argv, options_.log_path, timeout + std::chrono::seconds(1), kHint,
                  "pg_ctl promote of " + options_.data_dir);
}

Status PostgresServer::StartOn(bool* port_taken) {
  std::vector<std::string> argv = AsServerUser("postgres");
  for (std::string arg :
       {std::string("-D"), options_.data_dir, std::string("-p"), std::to_string(port_),
        std::string("-c"), std::string("listen_addresses=127.0.0.1"), std::string("-c"),
        "unix_socket_directories=" + options_.data_dir}) {
    argv.push_back(std::move(arg));
  }
  for (const auto& setting : options_.settings) {
    argv.push_back("-c");
    argv.push_back(setting);
  }
  if (Status s = process_.Start({.argv = argv, .output_path = options_.log_path}); !s.ok()) {
    return Status::Unavailable("cannot start postgres: " + s.message());
  }
  const std::string pid = std::to_string(process_.pid());
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto lines = PidFileLines(options_.data_dir);
    if (lines.size() >= 8 && lines[0] == pid && lines[3] == std::to_string(port_) &&
        lines[7].starts_with("ready")) {
      return Status::Ok();
    }
    if (process_.Exited()) {
      std::string output = process_.OutputTail();
      *port_taken = output.find("in use") != std::string::npos;
      return Status::Unavailable("postgres exited at start on port " + std::to_string(port_) +
                                 "; its output:\n" + output);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Stop();
  return Status::Unavailable("postgres was not ready on port " + std::to_string(port_) +
                             " within " + std::to_string(options_.start_timeout.count()) +
                             "ms; its output:\n" + process_.OutputTail());
}

void PostgresServer::Stop() {
  // SIGINT: a fast shutdown (transactions rolled back, a checkpoint); SIGKILL past the
  // timeout, a crash the next start recovers from.
  process_.Stop(SIGINT, options_.start_timeout);
}

}  // namespace fencekit::procutil
