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

#include "guards/guard_adapter.h"

namespace fencekit {
namespace {

namespace json = boost::json;
using namespace guards;
using testing::TempDir;

Outcome Expected(const std::string& s) {
  return s == "accepted" ? Outcome::kAccepted : s == "stale" ? Outcome::kStale : Outcome::kBad;
}

std::unique_ptr<Guard> MakeGuard(const std::string& name, const std::string& dir) {
  if (auto g = MakeSqlGuard(name, dir)) return g;
  return MakeKvGuard(name, dir);
}

json::object Cases() {
  boost::system::error_code ec;
  auto v = json::parse(ReadWholeFile(GUARD_CASES), ec);
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
    if (highest) {
      EXPECT_EQ(guard_->HighestOf(a), highest) << a.detail;
    }
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

  guard_->CheckItsOwnCases();
}

INSTANTIATE_TEST_SUITE_P(Guards, GuardConformanceTest,
                         ::testing::Values("sqlite", "postgresql", "mariadb", "redis", "etcd_api",
                                           "etcd_script", "fenced"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace fencekit
