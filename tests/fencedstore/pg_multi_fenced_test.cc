// Three `fenced` processes on one PostgreSQL database make one fence per lock: a token any of
// them accepted makes every lower one stale through all of them, and the pause kit's checker
// finds neither a stale token accepted nor an update lost when writers spread their claims,
// reads and writes over the three at random.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/pausetest/checker.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/procutil/fenced_server.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using pausetest::HistoryOp;
using pausetest::NowMicros;
using testing::FencedBinary;
using testing::RawConnection;
using testing::Request;
using testing::TempDir;

constexpr int kStores = 3;

// A new database on the shared PostgreSQL server, and three fenced on it.
class MultiFencedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string db = testing::NewPostgresDatabase();
    ASSERT_FALSE(db.empty());
    for (int i = 0; i < kStores; ++i) {
      Status s = fenced_[i].Start({.binary = FencedBinary(),
                                   .db = db,
                                   .log_path = dir_.File("fenced" + std::to_string(i) + ".log")});
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  std::unique_ptr<StoreClient> Client(int store) {
    return testing::ValueOrThrow(StoreClient::Open(fenced_[store].url(), {.timeout = 5s}),
                                 "opening the store client");
  }

  TempDir dir_;
  std::array<procutil::FencedServer, kStores> fenced_;
};

TEST_F(MultiFencedTest, TokenAcceptedThroughOneFencedIsTheFenceOfTheOthers) {
  auto a = Client(0);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->Put("shared", *FencingToken::FromInt(10), "doc", "from A").ok());

  RawConnection b(fenced_[1].port());
  b.Send(Request("PUT", "/v1/objects/doc", {{"Fencing-Lock", "shared"}, {"Fencing-Token", "9"}},
                 "from B, stale"));
  auto refused = b.Read();
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("\"stale_token\""), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("\"highest\":10"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.header("fencing-highest"), "10");

  // The third sees the fence and A's value, and takes the next token.
  auto c = Client(2);
  ASSERT_NE(c, nullptr);
  auto fence = c->Highest("shared");
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  ASSERT_TRUE(fence->has_value());
  EXPECT_EQ((*fence)->value(), 10);
  auto got = c->Get("doc");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->value, "from A");
  EXPECT_TRUE(c->Put("shared", *FencingToken::FromInt(11), "doc", "from C").ok());
  auto stale_again = a->Put("shared", *FencingToken::FromInt(10), "doc", "A again");
  EXPECT_TRUE(stale_again.status().IsStaleToken()) << stale_again.status().ToString();
  EXPECT_EQ(HighestToken(stale_again.status()), 11);
}

constexpr int kLocks = 2;
constexpr int kClientsPerLock = 3;
constexpr int kRoundsPerClient = 40;

// The pause kit's client loop without a lock service: every client of a lock takes the next
// token of the lock's shared counter as if it had been granted the lock, so grants overlap
// and the fence alone decides. Each claim, read and write goes through a fenced picked at
// random. Clients other than the first of each lock sometimes wait, after reading, until the
// fence has passed their token, so that their write is stale on purpose.
class Clients {
 public:
  Clients(std::vector<std::string> urls, pausetest::HistoryWriter* history)
      : urls_(std::move(urls)), history_(history) {}

  static std::string Lock(int l) { return "multi-" + std::to_string(l); }
  static std::string Counter(int l) { return "counter-" + std::to_string(l); }

  void Run() {
    std::vector<std::thread> threads;
    for (int c = 0; c < kLocks * kClientsPerLock; ++c) {
      threads.emplace_back([this, c] { RunClient(c); });
    }
    for (auto& t : threads) t.join();
  }

  int delayed_writes() const { return delayed_writes_; }
  int delayed_writes_accepted() const { return delayed_writes_accepted_; }

 private:
  void RunClient(int c) {
    const int l = c % kLocks;
    const bool may_delay = c >= kLocks;  // the first client of each lock never waits
    std::vector<std::unique_ptr<StoreClient>> stores;
    for (const auto& url : urls_) {
      auto s = StoreClient::Open(url, {.timeout = 5s});
      if (!s.ok()) {
        ADD_FAILURE() << s.status().ToString();
        return;
      }
      stores.push_back(std::move(s).value());
    }
    std::mt19937 rng(1000 + c);
    auto any = [&]() -> StoreClient& {
      return *stores[std::uniform_int_distribution<int>(0, kStores - 1)(rng)];
    };
    const std::string claim_key = "claim-" + std::to_string(c);
    for (int round = 0; round < kRoundsPerClient; ++round) {
      const std::int64_t token = ++next_token_[l];
      const auto t = *FencingToken::FromInt(token);
      Append({.client = c,
              .op = "acquire",
              .lock = Lock(l),
              .token = token,
              .start_us = NowMicros(),
              .end_us = NowMicros(),
              .outcome = "ok"});

      HistoryOp claim{.client = c,
                      .op = "claim",
                      .lock = Lock(l),
                      .token = token,
                      .key = claim_key,
                      .value = c,
                      .start_us = NowMicros()};
      if (!Record(claim, any().Put(Lock(l), t, claim_key, std::to_string(c)).status())) continue;

      HistoryOp read{.client = c,
                     .op = "read",
                     .lock = Lock(l),
                     .token = token,
                     .key = Counter(l),
                     .start_us = NowMicros()};
      auto got = any().Get(Counter(l));
      Status read_status = got.status().IsNotFound() ? Status::Ok() : got.status();
      read.value = got.ok() ? std::atoll(got->value.c_str()) : 0;
      if (!Record(read, read_status)) continue;

      bool delayed = false;
      if (may_delay && std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
        // Bounded: the first client of the lock keeps taking newer tokens.
        delayed = testing::WaitFor(
            [&] {
              auto highest = any().Highest(Lock(l));
              return highest.ok() && highest->has_value() && (*highest)->value() > token;
            },
            5s);
      }
      HistoryOp write{.client = c,
                      .op = "write",
                      .lock = Lock(l),
                      .token = token,
                      .key = Counter(l),
                      .value = read.value + 1,
                      .start_us = NowMicros()};
      Status s = any().Put(Lock(l), t, Counter(l), std::to_string(write.value)).status();
      Record(write, s);
      if (delayed) {
        ++delayed_writes_;
        if (s.ok()) ++delayed_writes_accepted_;
      }
    }
  }

  // Ends `op` with `s` and appends it; true when it succeeded.
  bool Record(HistoryOp& op, const Status& s) {
    op.end_us = NowMicros();
    op.outcome = s.ok() ? "ok" : s.IsStaleToken() ? "stale" : "error";
    if (!s.ok()) op.detail = s.ToString();
    Append(op);
    return s.ok();
  }
  void Append(const HistoryOp& op) {
    Status s = history_->Append(op);
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  }

  const std::vector<std::string> urls_;
  pausetest::HistoryWriter* history_;
  std::array<std::atomic<std::int64_t>, kLocks> next_token_{};
  std::atomic<int> delayed_writes_{0}, delayed_writes_accepted_{0};
};

TEST_F(MultiFencedTest, InterleavedTokensThroughThreeFencedPassThePauseKitsChecker) {
  const std::string history_path = dir_.File("history.jsonl");
  auto history = pausetest::HistoryWriter::Open(history_path);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  std::vector<std::string> urls;
  for (auto& f : fenced_) urls.push_back(f.url());
  Clients clients(urls, &*history);
  clients.Run();

  pausetest::CheckInput input;
  auto ops = pausetest::ReadHistory(history_path);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  input.history = std::move(ops).value();
  auto store = Client(1);
  ASSERT_NE(store, nullptr);
  auto log = store->History(10'000);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  input.store_log = std::move(log).value();
  for (int l = 0; l < kLocks; ++l) {
    auto got = store->Get(Clients::Counter(l));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    input.final_counters[Clients::Counter(l)] = std::atoll(got->value.c_str());
  }
  pausetest::CheckReport report = pausetest::CheckHistory(input);

  int stale = 0, errors = 0, decided = 0;
  for (const HistoryOp& op : input.history) {
    stale += op.outcome == "stale";
    errors += op.outcome == "error";
    decided += (op.op == "claim" || op.op == "write") && op.outcome != "error";
  }
  std::cout << "three fenced: " << report.acknowledged_writes << " acknowledged writes, " << stale
            << " refused as stale, " << errors << " errors, " << clients.delayed_writes()
            << " writes delayed past a newer claim; stale_accepted=" << report.stale_accepted
            << " lost_updates=" << report.lost_updates
            << " missing_acknowledged=" << report.missing_acknowledged << "\n";
  EXPECT_TRUE(report.ok()) << ::testing::PrintToString(report.violations);
  EXPECT_EQ(errors, 0) << "every fenced and the database stayed up";
  EXPECT_EQ(clients.delayed_writes_accepted(), 0)
      << "a write whose token the fence had passed was accepted";
  EXPECT_GT(clients.delayed_writes(), 0) << "the run sent no write stale on purpose";
  EXPECT_GT(stale, 0);
  // Every accepted increment is on the counters: the store's log says how many there were.
  std::int64_t total = 0;
  for (const auto& [key, value] : input.final_counters) total += value;
  // Most writes are refused as stale by a newer claim: under AddressSanitizer on a busy machine,
  // 40 rounds per client once left 10 increments per lock.
  EXPECT_GE(total, kLocks * 5) << "too few increments to say anything";
  // The shared log holds every decision the three made, whichever made it.
  EXPECT_EQ(input.store_log.size(), static_cast<std::size_t>(decided));
}

}  // namespace
}  // namespace fencekit
