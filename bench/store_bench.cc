// fencedstore alone: durable fenced writes/s on a real SQLite file (WAL, synchronous=FULL),
// one write per transaction (the fsync ceiling, the baseline) beside group commit, measured in
// the same run so the ratio means something on a noisy machine.
//
//   build/bench/bench/store_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only
//
// The database goes in $FENCEKIT_BENCH_DIR, or the system temp directory: put it on the disk
// you want to measure (a tmpfs makes every fsync free and the baseline meaningless).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "fencekit/common/mutex.h"
#include "fencekit/fencedstore/store.h"

namespace fencekit {
namespace {

// A handful of locks; each holder writes many keys under one grant, then the next grant (a
// larger token) takes over: tokens increase per lock every kWritesPerGrant writes of the lock.
constexpr std::int64_t kLocks = 8;
constexpr std::int64_t kWritesPerGrant = 256;
constexpr std::int64_t kKeys = 4096;
const std::string kValue = std::string(100, 'v');  // a realistic small value

std::filesystem::path BenchDir() {
  const char* env = std::getenv("FENCEKIT_BENCH_DIR");
  std::filesystem::path base =
      env != nullptr && *env != '\0' ? std::filesystem::path(env)
                                     : std::filesystem::temp_directory_path();
  return base / ("fencekit-store-bench-" + std::to_string(getpid()));
}

// A fresh store in a fresh directory; the directory is removed when the store is closed.
class FreshStore {
 public:
  explicit FreshStore(std::size_t max_batch) {
    std::filesystem::remove_all(BenchDir());
    std::filesystem::create_directories(BenchDir());
    auto store = FencedStore::Open({.path = BenchDir() / "bench.db",
                                    .durability = Durability::kFull,
                                    .max_batch = max_batch});
    if (!store.ok()) {
      std::fprintf(stderr, "store_bench: %s\n", store.status().ToString().c_str());
      std::abort();
    }
    store_ = std::move(store).value();
  }
  ~FreshStore() {
    store_.reset();
    std::filesystem::remove_all(BenchDir());
  }
  FencedStore& operator*() { return *store_; }
  FencedStore* operator->() { return store_.get(); }

 private:
  std::unique_ptr<FencedStore> store_;
};

WriteRequest Request(std::int64_t i) {
  std::int64_t lock = i % kLocks;
  std::int64_t token = 1 + i / (kLocks * kWritesPerGrant);
  return {WriteRequest::Kind::kPut, "lock-" + std::to_string(lock),
          FencingToken::FromInt(token).value(), "key-" + std::to_string(i % kKeys), kValue};
}

// Fails the benchmark unless every write was accepted (none refused as stale, none failed).
void CheckAllAccepted(benchmark::State& state, FencedStore& store) {
  StoreStats s = store.Stats();
  const std::uint64_t stale = s.refused(StatusCode::kStaleToken);
  if (stale != 0 || s.failed != 0) {
    std::string why =
        std::to_string(stale) + " writes refused as stale, " + std::to_string(s.failed) + " failed";
    state.SkipWithError(why.c_str());
  }
  if (s.commits > 0) {
    state.counters["writes_per_commit"] =
        static_cast<double>(s.accepted) / static_cast<double>(s.commits);
  }
}

// Baseline: max_batch = 1 and one writer waiting for each write before the next, so every
// write is its own transaction and its own fsync.
void BM_OneWritePerTransaction(benchmark::State& state) {
  FreshStore store(1);
  std::int64_t i = 0;
  for (auto _ : state) {
    WriteRequest w = Request(i++);
    auto r = store->Put(w.lock, w.token, w.key, w.value);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  CheckAllAccepted(state, *store);
}

// Keeps `in_flight` writes submitted and not yet answered, for as long as it runs.
//
// kFromCallback: each write's callback submits the next write, so the window never shrinks and
// the harness costs no thread wake-up per write: this is what the store itself can do.
// kFromThread: one submitter thread refills the window; callbacks wake it when it waits for a
// free slot. Each refill then costs a cross-thread wake-up, as in a server whose I/O threads
// submit the writes (fenced does that).
class Pipeline {
 public:
  enum class Refill { kFromCallback, kFromThread };

  Pipeline(FencedStore& store, int in_flight, Refill refill)
      : store_(store), in_flight_(in_flight), refill_(refill) {}

  // Blocks until every submitted write has been answered.
  ~Pipeline() {
    MutexLock lock(mu_);
    stopping_ = true;
    while (outstanding_ != 0) cv_.Wait(mu_);
  }

  std::int64_t Completed() {
    MutexLock lock(mu_);
    return completed_;
  }

  // kFromCallback: fills the window once; the callbacks keep it full from then on.
  void Prime() {
    for (int k = 0; k < in_flight_; ++k) SubmitOne();
  }

  // kFromThread: submits `n` writes, each as soon as the window has room.
  void SubmitFromThread(std::int64_t n) {
    while (n > 0) {
      int room;
      {
        MutexLock lock(mu_);
        if (outstanding_ >= in_flight_) {
          waiting_for_room_ = true;
          while (outstanding_ >= in_flight_) cv_.Wait(mu_);
          waiting_for_room_ = false;
        }
        room = in_flight_ - outstanding_;
      }
      for (; room > 0 && n > 0; --room, --n) SubmitOne();
    }
  }

  // Blocks until at least `target` writes have been answered since the pipeline started.
  void WaitCompleted(std::int64_t target) {
    MutexLock lock(mu_);
    completed_target_ = target;
    // An empty window means writes failed and were not replaced; the caller reports that.
    while (completed_ < target && outstanding_ != 0) cv_.Wait(mu_);
  }

 private:
  void SubmitOne() {
    std::int64_t i;
    {
      MutexLock lock(mu_);
      i = next_++;
      ++outstanding_;
    }
    // Outside mu_: Submit may run the callback inline (e.g. when the store is closed).
    store_.Submit(Request(i), [this](Result<WriteReceipt> r) { OnDone(r.ok()); });
  }

  // Runs on the store's writer thread.
  void OnDone(bool ok) {
    std::int64_t next = -1;
    {
      MutexLock lock(mu_);
      ++completed_;
      bool wake = completed_ == completed_target_;
      if (refill_ == Refill::kFromCallback && !stopping_ && ok) {
        next = next_++;  // the new write takes this one's slot
      } else {
        --outstanding_;
        wake = wake || outstanding_ == 0 || waiting_for_room_;
      }
      if (wake) cv_.NotifyAll();
    }
    if (next >= 0) {
      store_.Submit(Request(next), [this](Result<WriteReceipt> r) { OnDone(r.ok()); });
    }
  }

  FencedStore& store_;
  const int in_flight_;
  const Refill refill_;
  Mutex mu_;
  CondVar cv_;
  std::int64_t next_ FENCEKIT_GUARDED_BY(mu_) = 0;
  int outstanding_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::int64_t completed_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::int64_t completed_target_ FENCEKIT_GUARDED_BY(mu_) = -1;
  bool stopping_ FENCEKIT_GUARDED_BY(mu_) = false;
  bool waiting_for_room_ FENCEKIT_GUARDED_BY(mu_) = false;
};

// Writes are counted in chunks so the harness wakes up once per chunk, not once per write.
constexpr std::int64_t kChunk = 1024;

// Group commit: max_batch = 256, `in_flight` writes outstanding at once (as from that many
// connections). Steady state only: the window is filled before the clock starts and drained
// after it stops.
void GroupCommit(benchmark::State& state, Pipeline::Refill refill) {
  const int in_flight = static_cast<int>(state.range(0));
  FreshStore store(256);
  {
    Pipeline pipeline(*store, in_flight, refill);
    if (refill == Pipeline::Refill::kFromCallback) pipeline.Prime();
    std::int64_t target = -1;
    while (state.KeepRunningBatch(kChunk)) {
      if (target < 0) target = pipeline.Completed();  // the clock has just started
      target += kChunk;
      if (refill == Pipeline::Refill::kFromCallback) {
        pipeline.WaitCompleted(target);
      } else {
        // Returns once the last write of the chunk is submitted, so at most `in_flight` of
        // the writes counted are still unanswered when the clock stops (under 0.1%).
        pipeline.SubmitFromThread(kChunk);
      }
    }
  }  // drains the window
  state.SetItemsProcessed(state.iterations());
  CheckAllAccepted(state, *store);
}

void BM_GroupCommit(benchmark::State& state) {
  GroupCommit(state, Pipeline::Refill::kFromCallback);
}
void BM_GroupCommitFromThread(benchmark::State& state) {
  GroupCommit(state, Pipeline::Refill::kFromThread);
}

BENCHMARK(BM_OneWritePerTransaction)->UseRealTime()->MinTime(3);
BENCHMARK(BM_GroupCommit)->ArgName("in_flight")->Arg(64)->Arg(256)->UseRealTime()->MinTime(3);
BENCHMARK(BM_GroupCommitFromThread)->ArgName("in_flight")->Arg(64)->UseRealTime()->MinTime(3);

}  // namespace
}  // namespace fencekit

BENCHMARK_MAIN();
