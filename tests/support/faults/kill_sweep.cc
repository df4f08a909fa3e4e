#include "support/faults/kill_sweep.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/procutil/fenced_server.h"
#include "support/test_support.h"

namespace fencekit::testing {
namespace {

struct Ack {
  std::string value;
  std::int64_t token = 0;
};

// A batch writer's keys: the group's name, then "-0" to "-3".
constexpr int kBatchKeys = 4;

struct Acked {
  std::mutex mu;
  std::map<std::string, Ack> writes;            // key -> what was acknowledged
  std::map<std::string, std::int64_t> batches;  // key group -> token of its last acked batch
  int batch_count = 0;
  std::map<std::string, std::int64_t> fence;  // lock -> highest acknowledged token
  int count = 0;
};

// Checks what `acked` holds against the restarted server; clears the writes (each point's
// writes are checked after the restart that follows it), keeps the fences.
void Check(const std::string& url, Acked& acked, KillSweepReport& report) {
  auto client = StoreClient::Open(url, {.timeout = std::chrono::seconds(10)});
  if (!client.ok()) {
    report.acked_lost += static_cast<int>(acked.writes.size() + acked.batches.size());
    return;
  }
  for (const auto& [key, ack] : acked.writes) {
    auto got = (*client)->Get(key);
    // A later write of the same writer that the kill cut short may have been committed all the
    // same (its answer was lost): never an older one, and never a value of another token.
    if (!got.ok() || got->token.value() < ack.token ||
        got->value != std::to_string(got->token.value())) {
      ++report.acked_lost;
    }
  }
  acked.writes.clear();
  for (const auto& [group, token] : acked.batches) {
    // A later batch the kill cut short may have been committed all the same; a torn one never.
    std::string first;
    for (int i = 0; i < kBatchKeys; ++i) {
      auto got = (*client)->Get(group + "-" + std::to_string(i));
      std::string value = got.ok() ? got->value : "(absent)";
      if (i == 0) first = value;
      if (!got.ok() || got->token.value() < token || value != first ||
          value != std::to_string(got->token.value())) {
        ++report.torn_batches;
        break;
      }
    }
  }
  acked.batches.clear();
  for (const auto& [lock, token] : acked.fence) {
    auto highest = (*client)->Highest(lock);
    if (!highest.ok() || !highest->has_value() || (*highest)->value() < token) {
      ++report.fence_regressions;
    }
  }
}

}  // namespace

std::string KillSweepReport::Line() const {
  return "kill: points=" + std::to_string(points) + " acked_lost=" + std::to_string(acked_lost) +
         " fence_regressions=" + std::to_string(fence_regressions) +
         " torn_batches=" + std::to_string(torn_batches);
}

KillSweepReport RunKillSweep(const KillSweepOptions& o) {
  TempDir dir;
  KillSweepReport report;
  std::mt19937_64 rng(o.seed);
  Acked acked;
  std::atomic<std::int64_t> next_token{1};
  procutil::FencedServer fenced;
  Status started = fenced.Start({.binary = o.fenced.empty() ? FencedBinary() : o.fenced,
                                 .db = dir.File("kill.db"),
                                 .log_path = dir.File("fenced.log")});
  if (!started.ok()) {
    ++report.start_failures;
    return report;
  }
  for (int point = 0; point < o.points; ++point) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int w = 0; w < o.writers + o.batch_writers; ++w) {
      writers.emplace_back([&, w] {
        auto client = StoreClient::Open(fenced.url(), {.timeout = std::chrono::seconds(5)});
        if (!client.ok()) return;
        std::string lock = "lock" + std::to_string(w % 2);
        if (w >= o.writers) {  // a batch writer
          lock = "batch-lock" + std::to_string(w);
          std::string group = "p" + std::to_string(point) + "-b" + std::to_string(w);
          while (!stop.load()) {
            std::int64_t token = next_token.fetch_add(1);
            std::vector<ObjectWrite> writes;
            for (int i = 0; i < kBatchKeys; ++i) {
              writes.push_back({false, group + "-" + std::to_string(i), std::to_string(token), {}});
            }
            auto r = (*client)->Batch(lock, FencingToken::FromInt(token).value(), writes, {});
            if (!r.ok()) return;  // the server is gone (its own lock: never stale)
            std::lock_guard l(acked.mu);
            acked.batches[group] = token;
            acked.fence[lock] = std::max(acked.fence[lock], token);
            ++acked.count;
            ++acked.batch_count;
          }
          return;
        }
        for (int n = 0; !stop.load(); ++n) {
          std::int64_t token = next_token.fetch_add(1);
          std::string key =
              "p" + std::to_string(point) + "-w" + std::to_string(w) + "-" + std::to_string(n % 8);
          std::string value = std::to_string(token);
          auto r = (*client)->Put(lock, FencingToken::FromInt(token).value(), key, value);
          if (r.ok()) {
            std::lock_guard l(acked.mu);
            acked.writes[key] = {value, token};
            acked.fence[lock] = std::max(acked.fence[lock], token);
            ++acked.count;
          } else if (!r.status().IsStaleToken()) {
            return;  // the server is gone
          }
        }
      });
    }
    // The seeded moment of the kill is the experiment itself, not a wait for an event.
    std::uniform_int_distribution<int> after(0, o.max_kill_after_ms * 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(after(rng)));
    stop = true;                          // requests in flight stay in flight
    Status restarted = fenced.Restart();  // SIGKILL now, then start on the same database
    for (auto& t : writers) t.join();
    ++report.points;
    if (!restarted.ok()) {
      ++report.start_failures;
      report.acked_lost += static_cast<int>(acked.writes.size() + acked.batches.size());
      break;
    }
    std::lock_guard l(acked.mu);
    Check(fenced.url(), acked, report);
  }
  report.acked = acked.count;
  report.acked_batches = acked.batch_count;
  fenced.Stop();
  return report;
}

}  // namespace fencekit::testing
