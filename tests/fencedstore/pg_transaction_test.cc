// pg::Transaction on a real PostgreSQL server, sent in two halves (Send, Finish): the next
// transaction goes out while one waits for its COMMIT, and what a failure before or at the
// COMMIT does to the one behind it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "pg/connection.h"
#include "pg/transaction.h"
#include "support/servers/pg_client.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit::fencedstore::pg {
namespace {

constexpr std::chrono::seconds kTimeout{30};

// Table t's tags are unique, checked at COMMIT; every COMMIT that inserted into it first takes
// advisory lock 7 shared (a deferred trigger), so a session holding the lock holds it up.
constexpr const char* kSchema = R"sql(
CREATE TABLE t (id int4 PRIMARY KEY, tag int4 UNIQUE DEFERRABLE INITIALLY DEFERRED);
CREATE FUNCTION wait_for_7() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(7); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION wait_for_7();
)sql";

Command Insert(int id, int tag) {
  Command c{"INSERT INTO t VALUES ($1::int4, $2::int4)"};
  c.Int(id).Int(tag);
  return c;
}

class PostgresTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::NewPostgresDatabase();
    ASSERT_FALSE(db_.empty());
    look_ = std::make_unique<testing::PgClient>(db_);
    ASSERT_TRUE(look_->ok()) << look_->error();
    auto made = look_->Query(kSchema);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    auto conn = Conn::Connect(db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
  }

  // t's ids, in order, joined by commas.
  std::string Ids() {
    auto ids = look_->Value("SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM t");
    return ids.ok() ? *ids : ids.status().ToString();
  }

  // With lock 7 held by another session: sends a transaction inserting row 1 and finishes it
  // on another thread (its outcome in `first_failure_` and the future); once its insert is done
  // and only its COMMIT is awaited, sends `second_` (inserting row 2) behind it. The COMMIT
  // then waits for lock 7. Whether the second was sent within 10 s.
  bool SendTheSecondWhileTheFirstCommits() {
    holder_ = std::make_unique<testing::PgClient>(db_);
    if (!holder_->Query("SELECT pg_advisory_lock(7)").ok()) return false;
    first_ = std::make_unique<Transaction>(*conn_, kTimeout);
    second_ = std::make_unique<Transaction>(*conn_, kTimeout);
    first_->Add(Insert(1, 1));
    second_->Add(Insert(2, 2));
    first_->Send(/*early=*/true);
    finished_ = std::async(std::launch::async, [this] {
      return first_
          ->Finish("the first", &first_failure_,
                   [this] {
                     second_->Send(/*early=*/true);
                     sent_.set_value();
                   })
          .ok();
    });
    return sent_.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  }
  // Lets the first's COMMIT go on.
  bool Release() { return holder_->Query("SELECT pg_advisory_unlock(7)").ok(); }

  std::string db_;
  std::unique_ptr<testing::PgClient> look_;  // a connection of the test's own
  std::unique_ptr<Conn> conn_;
  std::unique_ptr<testing::PgClient> holder_;  // holds lock 7
  std::unique_ptr<Transaction> first_, second_;
  Transaction::Failure first_failure_;
  std::promise<void> sent_;
  std::future<bool> finished_;  // the first's Finish succeeded
};

TEST_F(PostgresTransactionTest, TheNextTransactionIsSentWhileOneWaitsForItsCommit) {
  const bool sent_meanwhile = SendTheSecondWhileTheFirstCommits();
  const bool committed_meanwhile =
      finished_.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready;
  ASSERT_TRUE(Release());
  EXPECT_TRUE(sent_meanwhile);
  EXPECT_FALSE(committed_meanwhile);
  EXPECT_TRUE(finished_.get()) << first_failure_.status.ToString();
  Transaction::Failure failure;
  auto second_done = second_->Finish("the second", &failure);
  EXPECT_TRUE(second_done.ok()) << failure.status.ToString();
  EXPECT_EQ(Ids(), "1,2");
  EXPECT_EQ(conn_->in_flight(), 0);
  EXPECT_TRUE(conn_->Exec("SELECT 1", kTimeout).ok());  // out of pipeline mode
}

TEST_F(PostgresTransactionTest,
       ATransactionSentBehindACommitWhoseConnectionIsLostMayHaveCommitted) {
  const bool sent_meanwhile = SendTheSecondWhileTheFirstCommits();
  // The connection's backend is ended once its COMMIT waits for lock 7: the second may have
  // been sent before the COMMIT reached the lock.
  const bool commit_waited = testing::WaitFor([&] {
    auto waiting = look_->Value(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
        "wait_event_type = 'Lock' AND pid <> pg_backend_pid()");
    return waiting.ok() && *waiting == "1";
  });
  auto ended = look_->Value(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
      "current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()");
  const auto start = std::chrono::steady_clock::now();
  const bool first_ok = finished_.get();
  Transaction::Failure second_failure;
  const bool second_ok = second_->Finish("the second", &second_failure).ok();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(Release());
  EXPECT_TRUE(sent_meanwhile);
  EXPECT_TRUE(commit_waited);
  EXPECT_EQ(ended.ok() ? *ended : ended.status().ToString(), "1");
  EXPECT_FALSE(first_ok);
  EXPECT_TRUE(first_failure_.maybe_committed) << first_failure_.status.ToString();
  EXPECT_FALSE(second_ok);
  EXPECT_TRUE(second_failure.maybe_committed) << second_failure.status.ToString();
  EXPECT_TRUE(second_failure.status.IsUnavailable()) << second_failure.status.ToString();
  EXPECT_LT(took, std::chrono::seconds(10));  // not the 30 s timeout
  EXPECT_FALSE(conn_->usable());
  EXPECT_EQ(Ids(), "");
}

TEST_F(PostgresTransactionTest, AFailedCommitLeavesTheTransactionSentBehindItToCommit) {
  ASSERT_TRUE(look_->Query("INSERT INTO t VALUES (0, 9)").ok());
  Transaction first(*conn_, kTimeout), second(*conn_, kTimeout);
  first.Add(Insert(1, 9));  // a tag taken: refused at COMMIT, after the insert succeeded
  second.Add(Insert(2, 2));
  first.Send(/*early=*/true);
  bool sent = false;
  Transaction::Failure failure;
  auto r = first.Finish("the first", &failure, [&] {
    second.Send(/*early=*/true);
    sent = true;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(sent);
  EXPECT_EQ(failure.sql_state, "23505");
  EXPECT_FALSE(failure.maybe_committed);
  Transaction::Failure second_failure;
  auto second_done = second.Finish("the second", &second_failure);
  EXPECT_TRUE(second_done.ok()) << second_failure.status.ToString();
  EXPECT_EQ(Ids(), "0,2");
  EXPECT_TRUE(conn_->usable());
}

TEST_F(PostgresTransactionTest, AFailedCommandSendsNothingBehindItsTransactionAndRollsItBack) {
  Transaction first(*conn_, kTimeout);
  first.Add(Insert(1, 1)).Add(Command{"SELECT 1 / 0"});
  first.Send(/*early=*/true);
  bool called = false;
  Transaction::Failure failure;
  auto r = first.Finish("the first", &failure, [&] { called = true; });
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(called);
  EXPECT_EQ(failure.sql_state, "22012");
  ASSERT_TRUE(conn_->usable());
  Transaction next(*conn_, kTimeout);
  next.Add(Insert(3, 3));
  Transaction::Failure next_failure;
  EXPECT_TRUE(next.Commit("the next", &next_failure).ok()) << next_failure.status.ToString();
  EXPECT_EQ(Ids(), "3");
}

TEST_F(PostgresTransactionTest, AQueryWhileAPipelineIsInFlightFailsAndLeavesItIntact) {
  Transaction first(*conn_, kTimeout);
  first.Add(Insert(1, 1));
  first.Send();
  auto query = conn_->Exec("SELECT 1", kTimeout);
  EXPECT_FALSE(query.ok());
  Transaction::Failure failure;
  EXPECT_TRUE(first.Finish("the first", &failure).ok()) << failure.status.ToString();
  EXPECT_EQ(Ids(), "1");
}

}  // namespace
}  // namespace fencekit::fencedstore::pg
