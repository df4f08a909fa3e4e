// One conformance suite for every guard: the cases of tests/guard_cases.json (token forms, a
// sequence of stale, equal and higher tokens, lock names, a write that fails after the check, 16
// racing writers, a restart) run against each guard fencekit ships, each on a real server of
// its own, and compared with the one expected outcome (docs/guard-in-your-database.md, "One
// contract"). Adding a guard means writing an adapter (a Guard below) and listing it.
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

namespace fencekit {
namespace {

namespace json = boost::json;
using testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// What a guard decided.
enum class Outcome { kAccepted, kStale, kBad, kFailed, kNotApplicable };

const char* Name(Outcome o) {
  switch (o) {
    case Outcome::kAccepted:
      return "accepted";
    case Outcome::kStale:
      return "stale";
    case Outcome::kBad:
      return "bad";
    case Outcome::kFailed:
      return "failed";
    default:
      return "not applicable";
  }
}

Outcome Expected(const std::string& s) {
  return s == "accepted" ? Outcome::kAccepted : s == "stale" ? Outcome::kStale : Outcome::kBad;
}

struct Answer {
  Outcome outcome = Outcome::kFailed;
  std::string detail;  // the store's code and message, as it said them
};

// A token as the caller sends it: text, or (`blob`) bytes where the store tells them apart.
struct Token {
  std::string bytes;
  bool blob = false;
};

// One guard on a server of its own. Advance may run on several threads at once.
class Guard {
 public:
  virtual ~Guard() = default;
  // In one transaction: advance `lock`'s fence to `token`, then write `value` as the lock's
  // data (appended to its log where the store keeps one). `fail_after`: that write fails after
  // the advance, and nothing of the transaction may stay.
  virtual Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                         bool fail_after) = 0;
  // The fence's value; nullopt when there is none.
  virtual std::optional<std::int64_t> Fence(const std::string& lock) = 0;
  // What the accepted writes of `lock` left, in commit order: the log where the store keeps
  // one, else the data's last value alone.
  virtual std::vector<std::string> Writes(const std::string& lock) = 0;
  // Stops the server (as a crash where it can) and starts it on the same data.
  virtual Status Restart() = 0;
  // Names are text (valid UTF-8, no NUL) in this store: others are refused before the guard.
  virtual bool TextNames() const { return false; }
  // Whether a name or token with a NUL byte can be passed at all (not through argv).
  virtual bool TakesNul() const { return true; }
  // Whether a data write can fail after the guard's check in this store.
  virtual bool CanFailAfterCheck() const { return true; }
  // "lock" or "fence key": what the refusal's message names.
  virtual std::string NamedAs() const { return "lock"; }
  // Whether the refusal's message names the token and the highest (SQLite 3.40's RAISE cannot).
  virtual bool MessageHasNumbers() const { return true; }
  // Whether a refusal is the contract's message (fenced answers in JSON instead).
  virtual bool SaysFence() const { return true; }
  // The highest token a stale refusal names.
  virtual std::optional<std::int64_t> HighestOf(const Answer& a) const {
    const std::string marker = ": the highest is ";
    const auto at = a.detail.rfind(marker);
    if (at == std::string::npos) return std::nullopt;
    return std::stoll(a.detail.substr(at + marker.size()));
  }
};

// --- SQLite: the view's INSERT trigger (fencedstore/sql/sqlite-guard.sql) on a file.
class SqliteGuard final : public Guard {
 public:
  explicit SqliteGuard(const std::string& dir) : path_(dir + "/app.db") {
    sqlite3* db = Open();
    const std::string guard = Slurp(std::string(GUARD_SQL_DIR) + "/sqlite-guard.sql");
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
  explicit PostgresGuard(const std::string& dir)
      : options_{.data_dir = dir + "/pg", .settings = {"max_connections=60"}} {
    Status s = server_.Start(options_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    const std::string guard = Slurp(std::string(GUARD_SQL_DIR) + "/postgresql-guard.sql");
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

// --- Redis: FCALL fencekit_set (fencedstore/lua/fencekit.lua) on a redis-server of its own
// that keeps every write (appendfsync always); the fence key is the lock name.
class RedisGuard final : public Guard {
 public:
  explicit RedisGuard(const std::string& dir)
      : server_(std::make_unique<testing::RedisServer>(testing::RedisServer::Persistent(dir))) {
    const std::string lua = Slurp(std::string(GUARD_LUA_DIR) + "/fencekit.lua");
    auto reply = Call({"FUNCTION", "LOAD", "REPLACE", lua});
    EXPECT_EQ(reply.first, "ok") << reply.second;
  }

  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool) override {
    auto [kind, text] = Call({"FCALL", "fencekit_set", "2", lock, "data:" + lock, token.bytes,
                              value});
    Answer a;
    a.detail = text;
    if (kind == "ok") a.outcome = Outcome::kAccepted;
    if (kind == "error" && text.starts_with("FENCE ")) a.outcome = Outcome::kStale;
    if (kind == "error" && text.starts_with("ERR fencekit:")) a.outcome = Outcome::kBad;
    return a;
  }
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    auto [kind, text] = Call({"GET", lock});
    if (kind != "ok" || text.empty()) return std::nullopt;
    return std::stoll(text);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    auto [kind, text] = Call({"GET", "data:" + lock});
    if (kind != "ok" || text.empty()) return {};
    return {text};
  }
  Status Restart() override {
    server_->RestartKeepingData();
    // It answers LOADING until it has read its append-only file.
    if (!testing::WaitFor([&] { return Call({"PING"}).first == "ok"; })) {
      return Status::Unavailable("redis-server does not answer after its restart");
    }
    return Status::Ok();
  }
  // A function's writes (SET, DEL) cannot fail once its checks passed.
  bool CanFailAfterCheck() const override { return false; }
  std::string NamedAs() const override { return "fence key"; }

 private:
  // ("ok", the reply's text; "" for nil), or ("error", the error's text).
  std::pair<std::string, std::string> Call(const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", server_->port());
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    std::pair<std::string, std::string> out{"none", c->errstr};
    if (r != nullptr) {
      out.first = r->type == REDIS_REPLY_ERROR ? "error" : "ok";
      out.second = r->str != nullptr ? std::string(r->str, r->len) : "";
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

  std::unique_ptr<testing::RedisServer> server_;
};

// etcd's values for a fence, and a key's value, through the gateway of `port`.
std::optional<std::string> EtcdValue(std::uint16_t port, const std::string& key) {
  testing::RawConnection conn(port);
  conn.Send(testing::Request("POST", "/v3/kv/range", {{"Content-Type", "application/json"}},
                             R"({"key":")" + Base64Encode(key) + R"("})"));
  boost::system::error_code ec;
  auto v = json::parse(conn.Read().body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* kvs = v.as_object().if_contains("kvs");
  if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty()) return std::nullopt;
  return Base64Decode(kvs->as_array()[0].as_object().at("value").as_string());
}

std::optional<std::int64_t> EtcdFence(std::uint16_t port, const std::string& key) {
  auto v = EtcdValue(port, key);
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

// What the two etcd guards share: a one-member etcd of their own, the fence key the lock name
// and the data key "data:" and the name.
class EtcdBackedGuard : public Guard {
 public:
  EtcdBackedGuard() : etcd_(1) {}
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    return EtcdFence(etcd_.client_port(0), lock);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    auto v = EtcdValue(etcd_.client_port(0), "data:" + lock);
    if (!v) return {};
    return {*v};
  }
  Status Restart() override {
    etcd_.Kill(0);
    return etcd_.Restart(0);
  }
  std::string NamedAs() const override { return "fence key"; }

 protected:
  testing::EtcdCluster etcd_;
};

// --- etcd through fencekit::EtcdGuard (the C++ API; its token a FencingToken
// parsed from the text, as a caller would).
class EtcdApiGuard final : public EtcdBackedGuard {
 public:
  EtcdApiGuard() {
    auto guard = EtcdGuard::Open(etcd_.uri());
    EXPECT_TRUE(guard.ok()) << guard.status().ToString();
    if (guard.ok()) guard_ = std::move(guard).value();
  }
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    Answer a;
    auto parsed = FencingToken::Parse(token.bytes);
    if (!parsed.ok()) {
      a.outcome = Outcome::kBad;
      a.detail = parsed.status().message();
      return a;
    }
    // A value over etcd's request limit (1.5 MiB): the transaction fails whole.
    const std::string data = fail_after ? std::string(1'600'000, 'v') : value;
    Status s = guard_->Put(lock, "data:" + lock, data, *parsed);
    a.detail = s.message();
    a.outcome = s.ok()                                      ? Outcome::kAccepted
                : s.code() == StatusCode::kStaleToken       ? Outcome::kStale
                : s.code() == StatusCode::kInvalidArgument && !fail_after ? Outcome::kBad
                                                                          : Outcome::kFailed;
    return a;
  }

 private:
  std::unique_ptr<EtcdGuard> guard_;
};

// --- etcd from a shell: fencedstore/etcd/fencekit-etcd-guard.sh (curl to the gateway).
class EtcdScriptGuard final : public EtcdBackedGuard {
 public:
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool) override {
    Answer a;
    if (lock.find('\0') != std::string::npos || token.bytes.find('\0') != std::string::npos) {
      a.outcome = Outcome::kNotApplicable;  // argv cannot carry a NUL byte
      return a;
    }
    auto r = testing::RunCommand(
        {std::string(GUARD_ETCD_DIR) + "/fencekit-etcd-guard.sh", lock, token.bytes,
         "data:" + lock, value},
        {"ETCD_URL=http://127.0.0.1:" + std::to_string(etcd_.client_port(0))});
    a.detail = r.err;
    a.outcome = r.exit_code == 0   ? Outcome::kAccepted
                : r.exit_code == 3 ? Outcome::kStale
                : r.exit_code == 2 ? Outcome::kBad
                                   : Outcome::kFailed;
    while (!a.detail.empty() && a.detail.back() == '\n') a.detail.pop_back();
    return a;
  }
  bool TakesNul() const override { return false; }
  // The script's one transaction either writes both or nothing (EtcdApiGuard shows a failing
  // write); its own arguments cannot make the write fail.
  bool CanFailAfterCheck() const override { return false; }
};

// --- fenced itself: POST /v1/batch (the lock named in JSON, percent-encoded when it is not
// UTF-8; the token a JSON number when it is one, else a JSON string, which fenced refuses).
class FencedGuard final : public Guard {
 public:
  explicit FencedGuard(const std::string& dir) : db_(dir + "/fenced.db") {
    fenced_ = std::make_unique<testing::FencedProcess>(db_);
  }
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    const std::string number = R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)";
    std::string token_json;
    if (!token.blob && testing::FullMatch(token.bytes, number)) {
      token_json = token.bytes;
    } else {
      token_json = json::serialize(json::value(JsonSafeText(token.bytes)));
    }
    bool encoded = false;
    const std::string name = JsonSafeText(lock, &encoded);
    std::string body = "{\"lock\":" + json::serialize(json::value(name)) +
                       (encoded ? ",\"lock_encoding\":\"percent\"" : "") +
                       ",\"token\":" + token_json + ",\"writes\":[{\"op\":\"put\",\"key\":\"" +
                       KeyOf(lock) + "\",\"value\":" + json::serialize(json::value(value)) + "}";
    // A second write whose version precondition fails: the batch is refused whole.
    if (fail_after) body += R"(,{"op":"put","key":"other","value":"x","if_version":999})";
    body += "]}";
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("POST", "/v1/batch", {}, body));
    auto r = c.Read();
    Answer a;
    a.detail = std::to_string(r.status) + " " + r.body;
    a.outcome = r.status == 200                                       ? Outcome::kAccepted
                : r.status == 409 && r.body.find("\"stale_token\"") != std::string::npos
                    ? Outcome::kStale
                : r.status == 400 ? Outcome::kBad
                                  : Outcome::kFailed;
    return a;
  }
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("GET", "/v1/fences/" + PercentEncode(lock)));
    auto r = c.Read();
    boost::system::error_code ec;
    auto v = json::parse(r.body, ec);
    if (ec || r.status != 200) return std::nullopt;
    const std::int64_t highest = v.as_object().at("highest").as_int64();
    if (highest == 0) return std::nullopt;
    return highest;
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("GET", "/v1/objects/" + KeyOf(lock)));
    auto r = c.Read();
    if (r.status != 200) return {};
    return {r.body};
  }
  Status Restart() override {
    fenced_->Kill(SIGKILL);
    fenced_->Wait();
    fenced_ = std::make_unique<testing::FencedProcess>(db_);
    return fenced_->port() != 0 ? Status::Ok() : Status::Unavailable("fenced did not start");
  }
  // fenced answers 409 {"error":"stale_token","message",...,"highest":H} (docs/http-api.md).
  bool SaysFence() const override { return false; }
  std::optional<std::int64_t> HighestOf(const Answer& a) const override {
    boost::system::error_code ec;
    auto v = json::parse(a.detail.substr(a.detail.find('{')), ec);
    if (ec || !v.is_object() || !v.as_object().contains("highest")) return std::nullopt;
    return v.as_object().at("highest").to_number<std::int64_t>();
  }

 private:
  // A key per lock name (a name may be 1024 bytes, as long as a key may be).
  std::string KeyOf(const std::string& lock) {
    std::lock_guard<std::mutex> hold(mu_);
    auto [it, added] = keys_.emplace(lock, "d" + std::to_string(keys_.size()));
    return it->second;
  }

  std::string db_;
  std::unique_ptr<testing::FencedProcess> fenced_;
  std::mutex mu_;
  std::map<std::string, std::string> keys_;
};

std::unique_ptr<Guard> MakeGuard(const std::string& name, const std::string& dir) {
  if (name == "sqlite") return std::make_unique<SqliteGuard>(dir);
  if (name == "postgresql") return std::make_unique<PostgresGuard>(dir);
  if (name == "mariadb") return std::make_unique<MariadbGuard>(dir);
  if (name == "redis") return std::make_unique<RedisGuard>(dir);
  if (name == "etcd_api") return std::make_unique<EtcdApiGuard>();
  if (name == "etcd_script") return std::make_unique<EtcdScriptGuard>();
  return std::make_unique<FencedGuard>(dir);
}

json::object Cases() {
  boost::system::error_code ec;
  auto v = json::parse(Slurp(GUARD_CASES), ec);
  EXPECT_FALSE(ec) << GUARD_CASES << ": " << ec.message();
  return v.as_object();
}

Token TokenOf(const json::object& c) {
  if (const auto* hex = c.if_contains("blob_hex")) return {Unhex(hex->as_string()), true};
  return {std::string(c.at("form").as_string()), false};
}

std::string NameOf(const json::object& c) {
  if (const auto* hex = c.if_contains("hex")) return Unhex(hex->as_string());
  if (const auto* text = c.if_contains("text")) return std::string(text->as_string());
  return std::string(static_cast<std::size_t>(c.at("bytes").as_int64()),
                     c.at("repeat").as_string()[0]);
}

class GuardConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { guard_ = MakeGuard(GetParam(), dir_.path()); }

  // Checks that `a` is `want`; a stale refusal's message names the token and the highest.
  void Expect(const Answer& a, Outcome want, const std::string& token,
              std::optional<std::int64_t> highest = std::nullopt) {
    EXPECT_STREQ(Name(a.outcome), Name(want)) << a.detail;
    if (want != Outcome::kStale || a.outcome != Outcome::kStale) return;
    if (guard_->SaysFence()) {
      EXPECT_TRUE(a.detail.starts_with("FENCE stale token")) << a.detail;
      if (!guard_->MessageHasNumbers()) return;
      EXPECT_TRUE(a.detail.starts_with("FENCE stale token " + token + " for " +
                                       guard_->NamedAs() + " \""))
          << a.detail;
    }
    if (highest) EXPECT_EQ(guard_->HighestOf(a), highest) << a.detail;
  }

  TempDir dir_;
  std::unique_ptr<Guard> guard_;
};

TEST_P(GuardConformanceTest, EveryCaseHasTheOneExpectedOutcome) {
  const json::object cases = Cases();
  // Token forms, each on a lock of its own: a refused one stores nothing.
  int n = 0;
  for (const auto& v : cases.at("tokens").as_array()) {
    const json::object& c = v.as_object();
    const Token token = TokenOf(c);
    SCOPED_TRACE("token " + json::serialize(v));
    if (!guard_->TakesNul() && token.bytes.find('\0') != std::string::npos) continue;
    const std::string lock = "token-" + std::to_string(++n);
    const Outcome want = Expected(std::string(c.at("expect").as_string()));
    Expect(guard_->Advance(lock, token, "v", false), want, token.bytes);
    if (want == Outcome::kAccepted) {
      EXPECT_EQ(guard_->Fence(lock), std::stoll(token.bytes));
    } else {
      EXPECT_EQ(guard_->Fence(lock), std::nullopt);
    }
  }

  // Stale, equal and higher tokens on one lock.
  for (const auto& v : cases.at("sequence").as_array()) {
    const json::object& c = v.as_object();
    SCOPED_TRACE("sequence step " + json::serialize(v));
    const std::string token(c.at("token").as_string());
    std::optional<std::int64_t> highest;
    if (const auto* h = c.if_contains("highest")) highest = h->to_number<std::int64_t>();
    Expect(guard_->Advance("sequence", {token}, token, false),
           Expected(std::string(c.at("expect").as_string())), token, highest);
  }
  EXPECT_EQ(guard_->Fence("sequence"), INT64_MAX);

  // Lock names, each advanced to 3, then refused at 2.
  for (const auto& v : cases.at("names").as_array()) {
    const json::object& c = v.as_object();
    SCOPED_TRACE("name: " + std::string(c.at("about").as_string()));
    const std::string name = NameOf(c);
    if (!guard_->TakesNul() && name.find('\0') != std::string::npos) continue;
    Outcome want = Expected(std::string(c.at("expect").as_string()));
    if (guard_->TextNames() && c.contains("text_only")) want = Outcome::kBad;
    Expect(guard_->Advance(name, {"3"}, "v", false), want, "3");
    if (want == Outcome::kAccepted) {
      EXPECT_EQ(guard_->Fence(name), 3);
      Expect(guard_->Advance(name, {"2"}, "v", false), Outcome::kStale, "2", 3);
      EXPECT_EQ(guard_->Fence(name), 3);
    }
  }

  // A write that fails after the check: the fence does not move.
  if (guard_->CanFailAfterCheck()) {
    SCOPED_TRACE("a write that fails after the check");
    const auto& f = cases.at("failing_write").as_object();
    const std::string first(f.at("first").as_string()), then(f.at("then").as_string());
    Expect(guard_->Advance("failing", {first}, first, false), Outcome::kAccepted, first);
    EXPECT_EQ(guard_->Advance("failing", {then}, then, true).outcome, Outcome::kFailed);
    EXPECT_EQ(guard_->Fence("failing"), std::stoll(first));
    EXPECT_EQ(guard_->Writes("failing"), std::vector<std::string>{first});
  }

  // Racing writers: the fence ends at the highest token, and no token below an accepted one
  // was accepted after it (the log, in commit order, never goes down).
  {
    SCOPED_TRACE("racing writers");
    const int racers = static_cast<int>(cases.at("racers").as_int64());
    std::vector<Outcome> outcomes(static_cast<std::size_t>(racers));
    std::vector<std::string> details(static_cast<std::size_t>(racers));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < racers; ++i) {
      threads.emplace_back([&, i] {
        // Tokens in a scrambled order, all started together.
        const std::string token = std::to_string((i * 7) % racers + 1);
        ++ready;
        while (ready.load() < racers) std::this_thread::yield();
        Answer a = guard_->Advance("race", {token}, token, false);
        outcomes[static_cast<std::size_t>(i)] = a.outcome;
        details[static_cast<std::size_t>(i)] = a.detail;
      });
    }
    for (auto& t : threads) t.join();
    int accepted = 0;
    for (int i = 0; i < racers; ++i) {
      const auto o = outcomes[static_cast<std::size_t>(i)];
      EXPECT_TRUE(o == Outcome::kAccepted || o == Outcome::kStale)
          << Name(o) << ": " << details[static_cast<std::size_t>(i)];
      accepted += o == Outcome::kAccepted;
    }
    EXPECT_GE(accepted, 1);
    EXPECT_EQ(guard_->Fence("race"), racers);
    const std::vector<std::string> writes = guard_->Writes("race");
    ASSERT_FALSE(writes.empty());
    for (std::size_t i = 1; i < writes.size(); ++i) {
      EXPECT_LE(std::stoll(writes[i - 1]), std::stoll(writes[i])) << "write " << i;
    }
    EXPECT_EQ(writes.back(), std::to_string(racers));
  }

  // A restart keeps the fence: the token below is refused, the equal one accepted.
  {
    SCOPED_TRACE("restart");
    const auto& r = cases.at("restart").as_object();
    const std::string before(r.at("before").as_string()), stale(r.at("stale").as_string()),
        equal(r.at("equal").as_string());
    Expect(guard_->Advance("restart", {before}, before, false), Outcome::kAccepted, before);
    Status s = guard_->Restart();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(guard_->Fence("restart"), std::stoll(before));
    Expect(guard_->Advance("restart", {stale}, stale, false), Outcome::kStale, stale,
           std::stoll(before));
    Expect(guard_->Advance("restart", {equal}, equal, false), Outcome::kAccepted, equal);
  }

  if (auto* pg = dynamic_cast<PostgresGuard*>(guard_.get())) {
    SCOPED_TRACE("a temporary table named as the fences");
    pg->TemporaryTableCannotStandIn();
  }
}

INSTANTIATE_TEST_SUITE_P(Guards, GuardConformanceTest,
                         ::testing::Values("sqlite", "postgresql", "mariadb", "redis", "etcd_api",
                                           "etcd_script", "fenced"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace fencekit
