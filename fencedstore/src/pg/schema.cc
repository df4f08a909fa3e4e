#include "pg/schema.h"

#include <string>

#include "pg/functions.h"

namespace fencekit::fencedstore::pg {
namespace {

// Forward migrations: kMigrations[i] takes the schema from version i to i + 1.
constexpr const char* kMigrations[] = {
    // 0 -> 1
    R"sql(
CREATE SCHEMA fencekit;
CREATE TABLE fencekit.schema_version(version integer NOT NULL);
INSERT INTO fencekit.schema_version VALUES (0);
CREATE TABLE fencekit.fences(
  lock bytea PRIMARY KEY,
  highest bigint NOT NULL CHECK (highest >= 1),
  service text,
  confirmed boolean NOT NULL DEFAULT false);
CREATE TABLE fencekit.objects(
  key bytea PRIMARY KEY,
  value bytea NOT NULL,
  lock bytea NOT NULL,
  token bigint NOT NULL,
  version bigint NOT NULL);
CREATE TABLE fencekit.history(
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  time_ms bigint NOT NULL,
  op text NOT NULL,
  lock bytea NOT NULL,
  token bigint NOT NULL,
  key bytea NOT NULL,
  accepted boolean NOT NULL,
  highest bigint NOT NULL,
  reason text,
  principal bytea);
)sql",
    // 1 -> 2: versions from a store-wide sequence, so that a key created again after a delete
    // never repeats a version (an ETag). Versions given before, to keys deleted since, are not
    // known: the sequence starts above every version still stored. fencekit.write reports the
    // version before the write, a new signature: version 1's is dropped (kWriteFunctions makes the
    // new one, and fencekit.write_batch). A fenced of version 1 still running on the database
    // fails its writes rather than number versions the old way.
    R"sql(
CREATE SEQUENCE fencekit.versions AS bigint;
SELECT setval('fencekit.versions', coalesce((SELECT max(version) FROM fencekit.objects), 0) + 1,
              false);
DROP FUNCTION IF EXISTS fencekit.write(boolean, bytea, bigint, bytea, bytea, text, bytea,
                                       integer, text, boolean, boolean, bigint, bytea, boolean);
)sql",
    // 2 -> 3: the decisions of one call of fencekit.write_many are one row, their fields in
    // arrays in the call's order: a row per decision cost a fifth of a write. Each decision keeps
    // its own seq, from the history's sequence; `seqs` and `outcomes` are NULL where a write of
    // the call was decided and recorded by fencekit.write. A run is found by its highest seq.
    // The other decisions stay rows of fencekit.history; the history is both, in seq order.
    R"sql(
CREATE TABLE fencekit.history_runs(
  last_seq bigint PRIMARY KEY,
  time_ms bigint NOT NULL,
  seqs bigint[] NOT NULL,
  locks bytea[] NOT NULL,
  tokens bigint[] NOT NULL,
  keys bytea[] NOT NULL,
  outcomes text[] NOT NULL,
  highests bigint[] NOT NULL,
  principals bytea[] NOT NULL)
  WITH (toast_tuple_target = 8160);
)sql",
};
constexpr int kSchemaVersion = sizeof(kMigrations) / sizeof(kMigrations[0]);

// Any constant: the advisory lock that serialises migrations of one database.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(4604535542338244931)";

}  // namespace

Status Migrate(Conn& conn, const std::string& name, std::chrono::milliseconds timeout) {
  auto fail = [&](Status s) {
    if (conn.usable()) (void)conn.Exec("ROLLBACK", timeout);
    return s;
  };
  auto found =
      conn.Exec(std::string("BEGIN;") + kMigrationLock +
                    ";SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = "
                    "'fencekit')::int8, to_regclass('fencekit.schema_version') IS NOT NULL, "
                    "has_database_privilege(current_database(), 'CREATE'), "
                    "quote_ident(current_user), quote_ident(current_database())",
                timeout);
  if (!found.ok()) return fail(found.status());
  // Simple-protocol results come as text.
  bool has_schema = std::string(PQgetvalue(found->get(), 0, 0)) != "0";
  bool has_version = PQgetvalue(found->get(), 0, 1)[0] == 't';
  if (!has_schema && PQgetvalue(found->get(), 0, 2)[0] != 't') {
    // CREATE SCHEMA needs the CREATE privilege on the database (its owner has it).
    const std::string role = PQgetvalue(found->get(), 0, 3);
    const std::string db = PQgetvalue(found->get(), 0, 4);
    const std::string grant = "GRANT CREATE ON DATABASE " + db + " TO " + role + ";";
    const std::string own = "ALTER DATABASE " + db + " OWNER TO " + role + ";";
    return fail(Status::PermissionDenied(
        "the role " + role + " may not create the store's schema fencekit in the PostgreSQL " +
        "database " + name + ": as a superuser or the database's owner, run " + grant +
        " (or make it the owner: " + own + "). See docs/operations-postgresql.md"));
  }
  int version = 0;
  if (has_schema && !has_version) {
    return fail(Status::InvalidArgument(
        "the PostgreSQL database " + name +
        " has a schema named fencekit that is not a fencekit store's; give fenced a database "
        "without one, or drop that schema"));
  }
  if (has_version) {
    auto v = conn.Exec("SELECT max(version) FROM fencekit.schema_version", timeout);
    if (!v.ok()) return fail(v.status());
    version = std::stoi(PQgetvalue(v->get(), 0, 0));
  }
  if (version > kSchemaVersion) {
    return fail(
        Status::InvalidArgument("the store in the PostgreSQL database " + name +
                                " has schema version " + std::to_string(version) +
                                ", written by a newer fencekit; this build knows versions up to " +
                                std::to_string(kSchemaVersion) + ". Run a newer fenced"));
  }
  std::string script;
  for (int v = version; v < kSchemaVersion; ++v) script += kMigrations[v];
  script += kWriteFunctions;
  script +=
      "UPDATE fencekit.schema_version SET version = " + std::to_string(kSchemaVersion) + ";COMMIT";
  auto done = conn.Exec(script, timeout);
  if (!done.ok()) {
    std::string message = "migrating the store's schema in the PostgreSQL database " + name + ": " +
                          done.status().message();
    if (message.find("SQLSTATE 42501") != std::string::npos) {
      message +=
          "; the role must own the schema fencekit and its tables (as the role that made them "
          "does); see docs/operations-postgresql.md";
    }
    return fail(done.status().IsUnavailable() ? Status::Unavailable(message)
                                              : Status::IoError(message));
  }
  return Status::Ok();
}

}  // namespace fencekit::fencedstore::pg
