// fencedstore alone: durable fenced writes/s with one write per transaction (the fsync ceiling,
// the baseline) and with group commit, measured in the same run on a real SQLite file.
//   build/release/bench/store_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "fencekit/fencedstore/store.h"

namespace fencekit {
namespace {

constexpr int kLocks = 16;

std::unique_ptr<FencedStore> OpenFresh(std::size_t max_batch) {
  std::string dir = std::filesystem::temp_directory_path() /
                    ("fencekit-store-bench-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = FencedStore::Open({.path = dir + "/bench.db", .max_batch = max_batch});
  if (!store.ok()) std::abort();
  return std::move(store).value();
}

WriteRequest Request(std::int64_t i) {
  std::string lock = "lock" + std::to_string(i % kLocks);
  return {WriteRequest::Kind::kPut, lock, FencingToken::FromInt(1 + i / kLocks).value(),
          "key" + std::to_string(i % 4096), std::string(100, 'v')};
}

Result<WriteReceipt> request_put(FencedStore& store, WriteRequest w) {
  return store.Put(w.lock, w.token, w.key, w.value);
}

// Baseline: each write waits for its own commit (one fsync per write).
void BM_OneWritePerTransaction(benchmark::State& state) {
  auto store = OpenFresh(1);
  std::int64_t i = 0;
  for (auto _ : state) {
    auto r = request_put(*store, Request(i++));
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}

// Group commit: `in_flight` writes outstanding at once (as from that many connections).
void BM_GroupCommit(benchmark::State& state) {
  const int in_flight = static_cast<int>(state.range(0));
  auto store = OpenFresh(256);
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;
  std::atomic<std::int64_t> failures{0};
  std::int64_t i = 0;
  // The submitter refills in bursts: it sleeps while the window is full and is woken once half
  // of it has completed, so the harness does not pay a thread wake-up per write.
  for (auto _ : state) {
    {
      std::unique_lock lock(mu);
      if (outstanding >= in_flight) cv.wait(lock, [&] { return outstanding <= in_flight / 2; });
      ++outstanding;
    }
    store->Submit(Request(i++), [&](Result<WriteReceipt> r) {
      if (!r.ok()) failures.fetch_add(1);
      std::lock_guard lock(mu);
      if (--outstanding == in_flight / 2 || outstanding == 0) cv.notify_one();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outstanding == 0; });
  lock.unlock();
  if (failures.load() > 0) state.SkipWithError("some writes failed");
  auto stats = store->Stats();
  state.counters["writes_per_commit"] =
      static_cast<double>(stats.accepted + stats.refused_stale) / static_cast<double>(stats.commits);
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_OneWritePerTransaction)->UseRealTime()->MinTime(3);
BENCHMARK(BM_GroupCommit)->Arg(64)->Arg(256)->UseRealTime()->MinTime(3);

}  // namespace
}  // namespace fencekit

BENCHMARK_MAIN();
