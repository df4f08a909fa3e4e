#include "support/faults/power_loss.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/test_support.h"

namespace fencekit::testing {
namespace {

// What was acknowledged before the power went out.
struct Acked {
  std::mutex mu;
  std::map<std::string, int> value;                 // key -> the last acknowledged value
  std::map<std::string, std::int64_t> write_token;  // lock -> highest acknowledged write token
  std::map<std::string, std::int64_t> grant;        // lock -> highest token granted
};

bool IntegrityOk(const std::string& path) {
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
  sqlite3_stmt* st = nullptr;
  ok = ok && sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK &&
       sqlite3_step(st) == SQLITE_ROW &&
       std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "ok";
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok;
}

// The workload: each writer holds its own lock, takes a new grant every 8 writes, and puts
// rising values to 4 keys of its own. A writer stops at its first failure.
void RunWorkload(const PowerLossOptions& o, FencedStore& store, LockClient& locks, Acked& acked) {
  std::vector<std::thread> threads;
  for (int w = 0; w < o.writers; ++w) {
    threads.emplace_back([&, w] {
      std::string lock = "L" + std::to_string(w);
      Lease lease;
      for (int i = 0; i < o.writes_per_writer; ++i) {
        if (i % 8 == 0) {
          if (i > 0) (void)locks.Release(lease);
          auto granted = locks.TryAcquire(lock, std::chrono::seconds(60));
          if (!granted.ok()) return;
          lease = *granted;
          std::lock_guard l(acked.mu);
          acked.grant[lock] = std::max(acked.grant[lock], lease.token.value());
        }
        std::string key = "k" + std::to_string(w) + "-" + std::to_string(i % 4);
        auto r = store.Put(lock, lease.token, key, std::to_string(i));
        if (!r.ok()) return;
        std::lock_guard l(acked.mu);
        acked.value[key] = i;
        acked.write_token[lock] = std::max(acked.write_token[lock], lease.token.value());
      }
    });
  }
  for (auto& t : threads) t.join();
}

// One point: the workload cut at I/O call `crash_at` (0: never); adds what it finds to
// `report`. Returns the I/O calls the workload made.
std::uint64_t RunPoint(const PowerLossOptions& o, std::uint64_t crash_at, std::uint64_t seed,
                       PowerLossReport& report) {
  TempDir dir;
  FakeClock clock;
  std::string store_path = dir.File("store.db");
  std::string locks_uri = "sqlite://" + dir.File("locks.db");
  Acked acked;
  std::uint64_t calls = 0;
  {
    auto store = FencedStore::Open({.path = store_path, .durability = o.durability});
    auto locks = LockClient::Open(locks_uri, {.clock = &clock});
    if (!store.ok() || !locks.ok()) {
      ++report.integrity_failures;
      return 0;
    }
    FaultVfs::StartPowerLossModel();
    FaultVfs::CrashAt(crash_at);
    RunWorkload(o, **store, **locks, acked);
    calls = FaultVfs::calls();
  }  // closed: every connection is gone before the disk is looked at
  FaultVfs::LosePower(o.loss, seed);
  if (crash_at == 0) return calls;
  ++report.points;

  if (!IntegrityOk(store_path) || !IntegrityOk(dir.File("locks.db"))) ++report.integrity_failures;
  auto store = FencedStore::Open({.path = store_path, .durability = o.durability});
  if (!store.ok()) {
    ++report.integrity_failures;
    return calls;
  }
  for (const auto& [key, value] : acked.value) {
    auto got = (*store)->Get(key);
    // A later write that failed may have reached the disk all the same: never an older one.
    if (!got.ok() || std::stoi(got->value) < value) ++report.acked_lost;
  }
  for (const auto& [lock, token] : acked.write_token) {
    auto highest = (*store)->Highest(lock);
    if (!highest.ok() || !highest->has_value() || (*highest)->value() < token) {
      ++report.fence_regressions;
    }
  }
  auto locks = LockClient::Open(locks_uri, {.clock = &clock});
  if (!locks.ok()) {
    ++report.integrity_failures;
    return calls;
  }
  clock.Advance(std::chrono::minutes(2));  // every lease of before the loss has expired
  for (const auto& [lock, token] : acked.grant) {
    auto lease = (*locks)->TryAcquire(lock, std::chrono::seconds(60));
    if (!lease.ok() || lease->token.value() <= token) ++report.token_regressions;
  }
  return calls;
}

}  // namespace

std::string PowerLossReport::Line() const {
  return "power-loss: points=" + std::to_string(points) +
         " acked_lost=" + std::to_string(acked_lost) +
         " fence_regressions=" + std::to_string(fence_regressions) +
         " token_regressions=" + std::to_string(token_regressions) +
         " integrity_failures=" + std::to_string(integrity_failures);
}

PowerLossReport RunPowerLossSweep(const PowerLossOptions& options) {
  FaultVfs::Register(/*as_default=*/true);
  PowerLossReport report;
  std::mt19937_64 rng(options.seed);
  std::uint64_t total = RunPoint(options, 0, rng(), report);
  for (int i = 0; i < options.points && total > 0; ++i) {
    std::uint64_t crash_at = 1 + rng() % total;
    RunPoint(options, crash_at, rng(), report);
  }
  return report;
}

}  // namespace fencekit::testing
