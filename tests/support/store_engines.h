// The two engines of fencedstore for parameterised tests: a SQLite file in a test's folder, or a
// fresh database on a PostgreSQL server of the test process's own.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fencekit/procutil/postgres_server.h"
#include "support/test_support.h"

namespace fencekit::testing {

enum class StoreEngine { kSqlite, kPostgres };

// "sqlite" or "postgresql", for INSTANTIATE_TEST_SUITE_P.
std::string StoreEngineName(const ::testing::TestParamInfo<StoreEngine>& info);

// The process's PostgreSQL server, started on first use and stopped at exit. Its cluster is a
// copy of one made by initdb once per machine (under a file lock, in $TMPDIR), so a test
// process starts its server in well under a second. Fails the test and returns null when it
// cannot start.
procutil::PostgresServer* SharedPostgres();

// The URI of a new, empty database on SharedPostgres() ("" after a failure).
std::string NewPostgresDatabase();

// Where a test's store lives on `engine`: `dir`/store.db, or a new PostgreSQL database.
std::string StoreDatabase(StoreEngine engine, const TempDir& dir);

}  // namespace fencekit::testing
