#include "support/servers/store_engines.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
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

// The process's own server, for a test run without the ctest fixture.
struct Own {
  TempDir dir;
  procutil::PostgresServer server;
  Status status = StartPostgresFromTemplate(server, dir.File("pg"));
};

// "postgresql://postgres@127.0.0.1:PORT/" of the shared server, or the failure.
Result<std::string> SharedServerUri() {
  if (const char* fixture = std::getenv("FENCEKIT_TEST_POSTGRES"); fixture != nullptr) {
    std::ifstream in(fs::path(fixture) / "uri");
    std::string uri;
    if (std::getline(in, uri) && !uri.empty()) return uri;
    std::cerr << "no server in the fixture folder " << fixture
              << " ($FENCEKIT_TEST_POSTGRES): starting one of this process's own\n";
  }
  static Own own;
  if (!own.status.ok()) return own.status;
  return own.server.uri("");
}

}  // namespace

Status StartPostgresFromTemplate(procutil::PostgresServer& server, const std::string& data_dir,
                                 std::vector<std::string> settings) {
  fs::path cluster = fs::path(TmpBase()) / "fencekit-pg15-template" / "data";
  std::error_code ec;
  fs::create_directories(cluster.parent_path(), ec);
  if (Status s = EnsureTemplate(cluster); !s.ok()) return s;
  // cp -a keeps the files' owner (the postgres user when the tests run as root) and modes.
  std::string copy = "cp -a '" + cluster.string() + "' '" + data_dir + "'";
  if (std::system(copy.c_str()) != 0) {
    return Status::Unavailable("cannot copy the template cluster: " + copy);
  }
  return server.Start({.data_dir = data_dir, .settings = std::move(settings)});
}

std::string StoreEngineName(const ::testing::TestParamInfo<StoreEngine>& info) {
  return info.param == StoreEngine::kSqlite ? "sqlite" : "postgresql";
}

std::string NewPostgresDatabase() {
  static std::atomic<int> next{0};
  auto server = SharedServerUri();
  if (!server.ok()) {
    ADD_FAILURE() << "PostgreSQL did not start: " << server.status().ToString();
    return "";
  }
  std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(next++);
  std::unique_ptr<PGconn, void (*)(PGconn*)> c(PQconnectdb((*server + "postgres").c_str()),
                                               PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK) {
    ADD_FAILURE() << "cannot connect to PostgreSQL: " << PQerrorMessage(c.get());
    return "";
  }
  PGresult* r = PQexec(c.get(), ("CREATE DATABASE " + name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) ADD_FAILURE() << "CREATE DATABASE failed: " << PQresultErrorMessage(r);
  PQclear(r);
  return ok ? *server + name : "";
}

Result<std::vector<std::string>> QuerySql(const std::string& uri, const std::string& sql) {
  std::unique_ptr<PGconn, void (*)(PGconn*)> c(PQconnectdb(uri.c_str()), PQfinish);
  if (PQstatus(c.get()) != CONNECTION_OK) {
    return Status::Unavailable(std::string("cannot connect: ") + PQerrorMessage(c.get()));
  }
  std::unique_ptr<PGresult, void (*)(PGresult*)> r(PQexec(c.get(), sql.c_str()), PQclear);
  ExecStatusType st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    return Status::IoError(PQresultErrorMessage(r.get()));
  }
  std::vector<std::string> rows;
  for (int i = 0; i < PQntuples(r.get()); ++i) rows.emplace_back(PQgetvalue(r.get(), i, 0));
  return rows;
}

std::string StoreDatabase(StoreEngine engine, const TempDir& dir) {
  return engine == StoreEngine::kSqlite ? dir.File("store.db") : NewPostgresDatabase();
}

}  // namespace fencekit::testing
