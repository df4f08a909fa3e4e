#include "support/servers/pg_client.h"

namespace fencekit::testing {

PgClient::PgClient(const std::string& uri) : conn_(PQconnectdb(uri.c_str())) {}

PgClient::~PgClient() { PQfinish(conn_); }

Result<PgRows> PgClient::Query(const std::string& sql) {
  PGresult* last = nullptr;
  std::string failure;
  if (PQsendQuery(conn_, sql.c_str()) != 1) {
    return Status::Unavailable("cannot send \"" + sql + "\": " + error());
  }
  // Every result is read, so that the connection is ready for the next query.
  while (PGresult* r = PQgetResult(conn_)) {
    auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && failure.empty()) {
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      failure = std::string(state != nullptr ? state : "?????") + " " + PQresultErrorMessage(r);
    }
    if (last != nullptr) PQclear(last);
    last = r;
  }
  if (!failure.empty() || last == nullptr) {
    if (last != nullptr) PQclear(last);
    if (failure.empty()) failure = error();
    return Status::Unavailable("\"" + sql + "\" failed: " + failure);
  }
  PgRows rows;
  for (int i = 0; i < PQntuples(last); ++i) {
    auto& row = rows.emplace_back();
    for (int j = 0; j < PQnfields(last); ++j) row.emplace_back(PQgetvalue(last, i, j));
  }
  PQclear(last);
  return rows;
}

Result<std::string> PgClient::Value(const std::string& sql) {
  auto rows = Query(sql);
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty()) {
    return Status::NotFound("\"" + sql + "\" returned no row");
  }
  return rows->front().front();
}

}  // namespace fencekit::testing
