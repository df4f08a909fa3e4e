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
// $FENCEKIT_TEST_POSTGRES names; support/servers/fixture_main.cc), else one of the process's own,
// started from the template on first use and stopped at exit. Names are unique across the
// processes sharing a server.
std::string NewPostgresDatabase();

// Runs `sql` (simple protocol) on the database at `uri`: the first column of the last result's
// rows, or the error.
Result<std::vector<std::string>> QuerySql(const std::string& uri, const std::string& sql);

// Where a test's store lives on `engine`: `dir`/store.db, or a new PostgreSQL database.
std::string StoreDatabase(StoreEngine engine, const TempDir& dir);

// A fixture whose test has one store database on engine_ (SQLite unless OnEachEngine sets it):
// Db() makes it on the first call and returns the same one after.
class EngineFixture : public ::testing::Test {
 protected:
  const std::string& Db() {
    if (db_.empty()) db_ = StoreDatabase(engine_, dir_);
    return db_;
  }

  TempDir dir_;
  StoreEngine engine_ = StoreEngine::kSqlite;
  std::string db_;
};

// `Fixture` (an EngineFixture) with the engine as the test's parameter: its TEST_P tests run on
// a SQLite file and on a PostgreSQL database once the suite is instantiated with
// FENCEKIT_ON_EACH_ENGINE.
template <class Fixture>
class OnEachEngine : public Fixture, public ::testing::WithParamInterface<StoreEngine> {
 protected:
  void SetUp() override {
    this->engine_ = GetParam();
    Fixture::SetUp();
  }
};

}  // namespace fencekit::testing

// Instantiates `suite` (an OnEachEngine) as Engines/suite.Test/sqlite and .../postgresql: ctest
// gives the latter the shared PostgreSQL by that name (tests/CMakeLists.txt, POSTGRESQL_ARM).
#define FENCEKIT_ON_EACH_ENGINE(suite)                                                     \
  INSTANTIATE_TEST_SUITE_P(Engines, suite,                                                 \
                           ::testing::Values(::fencekit::testing::StoreEngine::kSqlite,    \
                                             ::fencekit::testing::StoreEngine::kPostgres), \
                           ::fencekit::testing::StoreEngineName)

namespace fencekit::testing {}  // namespace fencekit::testing
