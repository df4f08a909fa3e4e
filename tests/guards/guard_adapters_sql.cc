// The conformance suite's adapters of the SQL guards: SQLite, PostgreSQL, MariaDB.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "fencekit/common/text.h"
#include "fencekit/common/token.h"
#include "fencekit/lockclient/etcd_guard.h"
#include "fencekit/procutil/mariadb_server.h"
#include "fencekit/procutil/postgres_server.h"
#include "support/servers/etcd_server.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

#include "guards/guard_adapter.h"

namespace fencekit::guards {
namespace {

namespace json = boost::json;
using testing::TempDir;

// --- SQLite: the view's INSERT trigger (fencedstore/sql/sqlite-guard.sql) on a file.
class SqliteGuard final : public Guard {
 public:
  explicit SqliteGuard(const std::string& dir) : path_(dir + "/app.db") {
    sqlite3* db = Open();
    const std::string guard = ReadWholeFile(std::string(GUARD_SQL_DIR) + "/sqlite-guard.sql");
    for (int i = 0; i < 2; ++i) Exec(db, guard);  // loading twice is harmless
    Exec(db,
         "PRAGMA journal_mode=WAL; CREATE TABLE case_log(seq INTEGER PRIMARY KEY AUTOINCREMENT, "
         "lock TEXT NOT NULL, value TEXT NOT NULL)");
    sqlite3_close(db);
  }

  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    sqlite3* db = Open();
    Answer a;
    if (!Exec(db, "BEGIN IMMEDIATE")) {
      a.detail = sqlite3_errmsg(db);
      sqlite3_close(db);
      return a;
    }
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO fencekit_advance(lock, token) VALUES(?1, ?2)", -1, &st,
                       nullptr);
    sqlite3_bind_text(st, 1, lock.data(), static_cast<int>(lock.size()), SQLITE_TRANSIENT);
    if (token.blob) {
      sqlite3_bind_blob(st, 2, token.bytes.data(), static_cast<int>(token.bytes.size()),
                        SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_text(st, 2, token.bytes.data(), static_cast<int>(token.bytes.size()),
                        SQLITE_TRANSIENT);
    }
    const int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
      const std::string message = sqlite3_errmsg(db);
      a.outcome = rc == SQLITE_CONSTRAINT && message.starts_with("FENCE stale token")
                      ? Outcome::kStale
                  : rc == SQLITE_CONSTRAINT && message.starts_with("FENCEKIT_ARGUMENT:")
                      ? Outcome::kBad
                      : Outcome::kFailed;
      a.detail = message;
      Exec(db, "ROLLBACK");
      sqlite3_close(db);
      return a;
    }
    sqlite3_prepare_v2(db, "INSERT INTO case_log(lock, value) VALUES(?1, ?2)", -1, &st, nullptr);
    sqlite3_bind_text(st, 1, lock.data(), static_cast<int>(lock.size()), SQLITE_TRANSIENT);
    if (!fail_after) sqlite3_bind_text(st, 2, value.data(), -1, SQLITE_TRANSIENT);  // else NULL
    const int wrote = sqlite3_step(st);
    sqlite3_finalize(st);
    if (wrote != SQLITE_DONE || !Exec(db, "COMMIT")) {
      a.detail = sqlite3_errmsg(db);
      Exec(db, "ROLLBACK");
      sqlite3_close(db);
      return a;
    }
    sqlite3_close(db);
    a.outcome = Outcome::kAccepted;
    return a;
  }

  std::optional<std::int64_t> Fence(const std::string& lock) override {
    auto rows = Rows("SELECT highest FROM fencekit_fences WHERE lock = ?1", lock);
    if (rows.empty()) return std::nullopt;
    return std::stoll(rows[0]);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    return Rows("SELECT value FROM case_log WHERE lock = ?1 ORDER BY seq", lock);
  }
  // Each call opens its own connection: a new one sees what the file holds.
  Status Restart() override { return Status::Ok(); }
  std::string NamedAs() const override { return "lock"; }
  bool MessageHasNumbers() const override { return false; }

 private:
  sqlite3* Open() {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    sqlite3_busy_timeout(db, 20'000);
    return db;
  }
  static bool Exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK && sql != "ROLLBACK") ADD_FAILURE() << sql.substr(0, 60) << ": " << err;
    sqlite3_free(err);
    return rc == SQLITE_OK;
  }
  std::vector<std::string> Rows(const char* sql, const std::string& lock) {
    sqlite3* db = Open();
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    sqlite3_bind_text(st, 1, lock.data(), static_cast<int>(lock.size()), SQLITE_TRANSIENT);
    std::vector<std::string> out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  std::string path_;
};

// --- PostgreSQL: fencekit_advance (fencedstore/sql/postgresql-guard.sql) on a server of its
// own; names and tokens go as text parameters in binary form (their bytes as they are).
class PostgresGuard final : public Guard {
 public:
  void CheckItsOwnCases() override {
    SCOPED_TRACE("a temporary table named as the fences");
    TemporaryTableCannotStandIn();
  }
  explicit PostgresGuard(const std::string& dir)
      : options_{.data_dir = dir + "/pg", .settings = {"max_connections=60"}} {
    Status s = server_.Start(options_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    const std::string guard = ReadWholeFile(std::string(GUARD_SQL_DIR) + "/postgresql-guard.sql");
    for (int i = 0; i < 2; ++i) EXPECT_EQ(Run(guard), "") << last_;
    EXPECT_EQ(Run("CREATE TABLE case_log(seq bigserial PRIMARY KEY, lock text NOT NULL, "
                  "value text NOT NULL)"),
              "")
        << last_;
  }

  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    PGconn* c = PQconnectdb(server_.uri().c_str());
    Answer a;
    std::string message;
    auto take = [&](PGresult* r) {
      std::string state;
      auto st = PQresultStatus(r);
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const char* msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
        state = code != nullptr ? code : "?????";
        a.detail = state + " " + (msg != nullptr ? msg : "");
        message = msg != nullptr ? msg : "";
      }
      PQclear(r);
      return state;
    };
    take(PQexec(c, "BEGIN"));
    const Oid types[] = {25, token.blob ? Oid{17} : Oid{25}};
    const char* values[] = {lock.data(), token.bytes.data()};
    const int lengths[] = {static_cast<int>(lock.size()), static_cast<int>(token.bytes.size())};
    const int formats[] = {1, 1};
    const std::string state = take(PQexecParams(c, "SELECT fencekit_advance($1, $2)", 2, types,
                                                values, lengths, formats, 0));
    if (state.empty()) {
      const std::string insert =
          fail_after ? "INSERT INTO case_log(lock, value) VALUES($1, NULL)"
                     : "INSERT INTO case_log(lock, value) VALUES($1, $2)";
      const char* row[] = {lock.data(), value.data()};
      const int row_lengths[] = {static_cast<int>(lock.size()), static_cast<int>(value.size())};
      const Oid row_types[] = {25, 25};
      if (take(PQexecParams(c, insert.c_str(), fail_after ? 1 : 2, row_types, row, row_lengths,
                            formats, 0))
              .empty() &&
          take(PQexec(c, "COMMIT")).empty()) {
        a.outcome = Outcome::kAccepted;
      }
    } else if (state == "P0001" && message.starts_with("FENCE stale token")) {
      a.outcome = Outcome::kStale;
    } else if (state == "22023" || (state == "22021" && !IsValidUtf8NoNul(lock))) {
      // 22021: PostgreSQL's own refusal of a name that is not text, before the guard runs.
      a.outcome = Outcome::kBad;
    }
    if (a.outcome == Outcome::kStale || a.outcome == Outcome::kBad) a.detail = message;
    PQfinish(c);
    return a;
  }

  std::optional<std::int64_t> Fence(const std::string& lock) override {
    auto rows = Rows("SELECT highest FROM fencekit_fences WHERE lock = $1", lock);
    if (rows.empty()) return std::nullopt;
    return std::stoll(rows[0]);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    return Rows("SELECT value FROM case_log WHERE lock = $1 ORDER BY seq", lock);
  }
  Status Restart() override {
    server_.Kill();  // as a crash: WAL recovery at the start
    return server_.Start(options_);
  }
  bool TextNames() const override { return true; }

  // A session's temporary table named as the fences (pg_temp comes first in a search_path that
  // does not name it) must not stand in for them: the function's search_path is pinned.
  void TemporaryTableCannotStandIn() {
    PGconn* c = PQconnectdb(server_.uri().c_str());
    auto exec = [&](const char* sql) {
      PGresult* r = PQexec(c, sql);
      const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      std::string state = code != nullptr ? code : "";
      PQclear(r);
      return state;
    };
    EXPECT_EQ(exec("SELECT fencekit_advance('temp-probe', '9')"), "");
    EXPECT_EQ(exec("CREATE TEMP TABLE fencekit_fences (lock text PRIMARY KEY, highest bigint)"),
              "");
    EXPECT_EQ(exec("SELECT fencekit_advance('temp-probe', '3')"), "P0001");
    EXPECT_EQ(exec("SELECT fencekit_advance('temp-probe', 3)"), "P0001");
    PQfinish(c);
    EXPECT_EQ(Fence("temp-probe"), 9);
  }

 private:
  static bool IsValidUtf8NoNul(const std::string& s) {
    return IsValidUtf8(s) && s.find('\0') == std::string::npos;
  }
  std::string Run(const std::string& sql) {
    PGconn* c = PQconnectdb(server_.uri().c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    std::string state = code != nullptr ? code : "";
    last_ = PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
    return state;
  }
  std::vector<std::string> Rows(const char* sql, const std::string& lock) {
    PGconn* c = PQconnectdb(server_.uri().c_str());
    const Oid types[] = {25};
    const char* values[] = {lock.data()};
    const int lengths[] = {static_cast<int>(lock.size())};
    const int formats[] = {1};
    PGresult* r = PQexecParams(c, sql, 1, types, values, lengths, formats, 0);
    std::vector<std::string> out;
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
      for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0));
    }
    PQclear(r);
    PQfinish(c);
    return out;
  }

  procutil::PostgresOptions options_;
  procutil::PostgresServer server_;
  std::string last_;
};

// --- MariaDB: CALL fencekit_advance (fencedstore/sql/mariadb-guard.sql) through the `mariadb`
// client, names and tokens as hex literals (any bytes); a client that stops at an error ends
// its connection, which rolls its transaction back.
class MariadbGuard final : public Guard {
 public:
  explicit MariadbGuard(const std::string& dir) : options_{.data_dir = dir + "/mariadb"} {
    Status s = server_.Start(options_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto r = Client("", "CREATE DATABASE app");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (int i = 0; i < 2; ++i) {
      r = Client("app", "SOURCE " + std::string(GUARD_SQL_DIR) + "/mariadb-guard.sql");
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    r = Client("app",
               "CREATE TABLE case_log(seq BIGINT AUTO_INCREMENT PRIMARY KEY, lock_name "
               "VARBINARY(1024) NOT NULL, value VARBINARY(64) NOT NULL) ENGINE=InnoDB");
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    const std::string name = Literal(lock);
    auto r = Client("app", "START TRANSACTION; CALL fencekit_advance(" + name + ", " +
                               Literal(token.bytes) + "); INSERT INTO case_log(lock_name, value) "
                               "VALUES (" + name + ", " + (fail_after ? "NULL" : Literal(value)) +
                               "); COMMIT;");
    Answer a;
    if (r.exit_code == 0) {
      a.outcome = Outcome::kAccepted;
      return a;
    }
    const std::vector<std::string> m =
        testing::Search(r.err, R"(ERROR \d+ \(([0-9A-Z]{5})\)[^:]*: (.*))");
    if (!m.empty()) {
      a.detail = m[2];
      if (m[1] == "45000") a.outcome = Outcome::kStale;
      if (m[1] == "22023") a.outcome = Outcome::kBad;
    } else {
      a.detail = r.err;
    }
    return a;
  }

  std::optional<std::int64_t> Fence(const std::string& lock) override {
    auto rows = Rows("SELECT highest FROM fencekit_fences WHERE lock_name = " + Literal(lock));
    if (rows.empty()) return std::nullopt;
    return std::stoll(rows[0]);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    return Rows("SELECT value FROM case_log WHERE lock_name = " + Literal(lock) +
                " ORDER BY seq");
  }
  Status Restart() override {
    server_.Stop();
    return server_.Start(options_);
  }

 private:
  // Any bytes as an SQL literal: X'' is the empty binary string.
  static std::string Literal(const std::string& bytes) { return "X'" + Hex(bytes) + "'"; }
  testing::CommandResult Client(const std::string& database, const std::string& sql) {
    std::vector<std::string> argv = server_.ClientArgv(database);
    for (const char* arg : {"--batch", "--skip-column-names", "-e"}) argv.emplace_back(arg);
    argv.push_back(sql);
    return testing::RunCommand(argv);
  }
  std::vector<std::string> Rows(const std::string& sql) {
    auto r = Client("app", sql);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  procutil::MariadbOptions options_;
  procutil::MariadbServer server_;
};

}  // namespace

std::unique_ptr<Guard> MakeSqlGuard(const std::string& name, const std::string& dir) {
  if (name == "sqlite") return std::make_unique<SqliteGuard>(dir);
  if (name == "postgresql") return std::make_unique<PostgresGuard>(dir);
  if (name == "mariadb") return std::make_unique<MariadbGuard>(dir);
  return nullptr;
}

}  // namespace fencekit::guards
