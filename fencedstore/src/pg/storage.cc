// Opening the PostgreSQL storage (store_engine.h): connect, migrate, configure.
#include <memory>
#include <string>
#include <utility>

#include "store_engine.h"
#include "pg/connection.h"
#include "pg/engine.h"
#include "pg/reads.h"
#include "pg/schema.h"

namespace fencekit::fencedstore {

bool IsPostgresUri(std::string_view path) {
  return path.starts_with("postgresql://") || path.starts_with("postgres://");
}

Result<Storage> OpenPostgresStorage(const StoreOptions& options) {
  auto conn = pg::Conn::Connect(options.path);
  if (!conn.ok()) return conn.status();
  if (auto s = pg::Migrate(**conn, pg::RedactUri(options.path), options.database_timeout);
      !s.ok()) {
    return s;
  }
  if (auto s = PostgresEngine::Configure(**conn, options); !s.ok()) return s;
  return Storage{std::make_unique<PostgresEngine>(options, std::move(conn).value()),
                 std::make_unique<PostgresReads>(options)};
}

}  // namespace fencekit::fencedstore
