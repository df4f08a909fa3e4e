#include "support/store_engines.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace fencekit::testing {
namespace {

namespace fs = std::filesystem;

std::string TmpBase() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr ? base : "/tmp";
}

// The cluster every test process copies: made once, by the first process to need it.
Status EnsureTemplate(const fs::path& cluster) {
  int fd = ::open((TmpBase() + "/fencekit-pg15-template.lock").c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return Status::Unavailable("cannot open the template's lock file");
  ::flock(fd, LOCK_EX);
  Status status = Status::Ok();
  if (!fs::exists(cluster / "PG_VERSION")) {
    std::error_code ec;
    fs::path building = cluster.parent_path() / "building";
    fs::remove_all(building, ec);
    {
      procutil::PostgresServer made;
      status = made.Start({.data_dir = building.string()});
    }  // stopped: a clean shutdown leaves a cluster that starts without recovery
    if (status.ok()) fs::rename(building, cluster, ec);
    if (status.ok() && ec)
      status = Status::Unavailable("cannot keep the template: " + ec.message());
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return status;
}

struct Shared {
  TempDir dir;
  procutil::PostgresServer server;
  Status status = Status::Unavailable("not started");

  Shared() {
    fs::path cluster = fs::path(TmpBase()) / "fencekit-pg15-template" / "data";
    std::error_code ec;
    fs::create_directories(cluster.parent_path(), ec);
    status = EnsureTemplate(cluster);
    if (!status.ok()) return;
    fs::path data = fs::path(dir.path()) / "pg";
    // cp -a keeps the files' owner (the postgres user when the tests run as root) and modes.
    std::string copy = "cp -a '" + cluster.string() + "' '" + data.string() + "'";
    if (std::system(copy.c_str()) != 0) {
      status = Status::Unavailable("cannot copy the template cluster: " + copy);
      return;
    }
    status = server.Start({.data_dir = data.string()});
  }
};

}  // namespace

std::string StoreEngineName(const ::testing::TestParamInfo<StoreEngine>& info) {
  return info.param == StoreEngine::kSqlite ? "sqlite" : "postgresql";
}

procutil::PostgresServer* SharedPostgres() {
  static Shared shared;
  if (!shared.status.ok()) {
    ADD_FAILURE() << "PostgreSQL did not start: " << shared.status.ToString();
    return nullptr;
  }
  return &shared.server;
}

std::string NewPostgresDatabase() {
  static std::atomic<int> next{0};
  procutil::PostgresServer* server = SharedPostgres();
  if (server == nullptr) return "";
  std::string name = "t" + std::to_string(next++);
  std::unique_ptr<PGconn, void (*)(PGconn*)> c(PQconnectdb(server->uri().c_str()), PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK) {
    ADD_FAILURE() << "cannot connect to PostgreSQL: " << PQerrorMessage(c.get());
    return "";
  }
  PGresult* r = PQexec(c.get(), ("CREATE DATABASE " + name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) ADD_FAILURE() << "CREATE DATABASE failed: " << PQresultErrorMessage(r);
  PQclear(r);
  return ok ? server->uri(name) : "";
}

std::string StoreDatabase(StoreEngine engine, const TempDir& dir) {
  return engine == StoreEngine::kSqlite ? dir.File("store.db") : NewPostgresDatabase();
}

}  // namespace fencekit::testing
