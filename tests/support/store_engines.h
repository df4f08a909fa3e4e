// The two engines of fencedstore for parameterised tests: a SQLite file in a test's folder, or a
// fresh database on a PostgreSQL server of the test process's own.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fencekit/procutil/postgres_server.h"
#include "support/test_support.h"

namespace fencekit::testing {

enum class StoreEngine { kSqlite, kPostgres };

// "sqlite" or "postgresql", for INSTANTIATE_TEST_SUITE_P.
std::string StoreEngineName(const ::testing::TestParamInfo<StoreEngine>& info);

// Starts `server` on a copy (in `data_dir`) of a cluster made by initdb once per machine (under
// a file lock, in $TMPDIR), so that it starts in well under a second, with `settings`
// (PostgresOptions::settings).
Status StartPostgresFromTemplate(procutil::PostgresServer& server, const std::string& data_dir,
                                 std::vector<std::string> settings = {});

// The URI of a new, empty database ("" after a failure, which fails the test) on the PostgreSQL
// server the test process shares: the ctest run's (the fixture fencekit_postgres, whose folder
// $FENCEKIT_TEST_POSTGRES names; support/fixture_main.cc), else one of the process's own,
// started from the template on first use and stopped at exit. Names are unique across the
// processes sharing a server.
std::string NewPostgresDatabase();

// Runs `sql` (simple protocol) on the database at `uri`: the first column of the last result's
// rows, or the error.
Result<std::vector<std::string>> QuerySql(const std::string& uri, const std::string& sql);

// Where a test's store lives on `engine`: `dir`/store.db, or a new PostgreSQL database.
std::string StoreDatabase(StoreEngine engine, const TempDir& dir);

}  // namespace fencekit::testing
