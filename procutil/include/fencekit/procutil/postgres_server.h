// A PostgreSQL server of its own for a test or a benchmark: initdb in a folder (or a streaming
// standby copied from a running primary), postgres on a free loopback port with its socket in
// that folder, stopped with the object.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct PostgresOptions {
  // The cluster's folder: made with initdb (or, with standby_of_port, pg_basebackup) when it
  // holds no cluster yet. Its path must be short enough for a Unix socket name (about 100
  // bytes). When this process runs as root, initdb, pg_basebackup and postgres run as the
  // `postgres` system user (PostgreSQL refuses root): the folder is given to that user and its
  // parent made traversable (o+x).
  std::string data_dir;
  // 0: a free port; if another process takes it first, Start() tries again with another.
  std::uint16_t port = 0;
  // Where the server's output is appended. Empty: `<data_dir>/../<folder name>.log`.
  std::string log_path;
  // Debian's postgresql-15.
  std::string bin_dir = "/usr/lib/postgresql/15/bin";
  // Extra settings, "name=value", passed as -c. The defaults keep acknowledged commits durable
  // (fsync on, synchronous_commit on).
  std::vector<std::string> settings;
  // > 0: the folder is made a streaming standby of the primary on this loopback port
  // (pg_basebackup -R -X stream as superuser postgres), which must accept replication
  // connections (a PostgresServer primary does: trust on loopback, wal_level=replica). Give it
  // the setting "cluster_name=NAME": the primary sees it under that application_name, the name
  // synchronous_standby_names lists.
  std::uint16_t standby_of_port = 0;
  std::chrono::milliseconds start_timeout{60'000};
};

// Ready when postmaster.pid names this child and says "ready", so a server of someone else's
// never passes for it. Superuser `postgres`, trust authentication on loopback and the socket.
// Thread safety: not safe for concurrent use.
class PostgresServer {
 public:
  // initdb if needed, then starts it and waits until ready. kUnavailable, quoting its output,
  // if it cannot (e.g. postgresql-15 is not installed).
  Status Start(PostgresOptions options);
  ~PostgresServer() { Stop(); }

  std::uint16_t port() const { return port_; }
  // "postgresql://postgres@127.0.0.1:<port>/<dbname>", for libpq.
  std::string uri(const std::string& dbname = "postgres") const;
  ChildProcess& process() { return process_; }

  // Fast shutdown (SIGINT: running transactions are rolled back, the rest is durable), then
  // waits at most start_timeout before SIGKILL (a crash, which recovery replays). Does nothing
  // if it is not running.
  void Stop();
  // SIGKILL to the postmaster and every process it started, at once, as the machine's crash
  // would: no backend lives on to answer, or to hold its client's connection open.
  // What was committed survives, by WAL recovery at the next Start.
  void Kill();
  // Makes a standby the primary (pg_ctl promote) and returns once it accepts writes.
  // kUnavailable, quoting pg_ctl, when it is no standby or is not promoted within `timeout`.
  Status Promote(std::chrono::seconds timeout = std::chrono::seconds(30));

 private:
  Status InitDb();
  Status BaseBackup();
  Status StartOn(bool* port_taken);
  // {"setpriv", ...postgres user..., "--"} when root, else {}; then `program`.
  std::vector<std::string> AsServerUser(const std::string& program) const;

  PostgresOptions options_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
  bool as_postgres_user_ = false;
};

}  // namespace fencekit::procutil
