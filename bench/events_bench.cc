// What fenced's write path pays for the event feed and the refusal log (httpapi/src/
// write_watch.h): the hook every write's result goes through, with nobody following
// GET /v1/events, with one reader, and for a refusal (a log line). CPU time per write, beside
// the ~60-600 us of CPU a whole HTTP write costs fenced (docs/benchmarks.md).
//
//   build/release/bench/events_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "observe/events.h"
#include "fencekit/fencedstore/refusal.h"
#include "observe/log_sink.h"
#include "net/write_watch.h"

namespace fencekit::httpapi {
namespace {

const std::string kLock = "orders/lock";
const std::string kKey = "orders/2026/000123";

// What the handler does per write: copy the facts, then hand the result over.
void Decide(WriteWatch& watch, const Result<WriteReceipt>& result, std::int64_t token) {
  WriteFacts facts{true, kLock, kKey, token, std::string()};
  watch.Decided(facts, result);
}

Result<WriteReceipt> Accepted() { return WriteReceipt{kKey, kLock, FencingToken(), 1, false}; }

void BM_AcceptedNobodyListening(benchmark::State& state) {
  EventHub hub({}, nullptr);
  LogSink log([](std::string_view) {}, nullptr);
  WriteWatch watch(&hub, &log);
  auto result = Accepted();
  std::int64_t token = 0;
  for (auto _ : state) Decide(watch, result, ++token);
}
BENCHMARK(BM_AcceptedNobodyListening);

void BM_AcceptedOneReader(benchmark::State& state) {
  EventHub hub({}, nullptr);
  LogSink log([](std::string_view) {}, nullptr);
  WriteWatch watch(&hub, &log);
  auto stream = hub.Open(nullptr, [] {});
  auto result = Accepted();
  std::string out;
  std::int64_t token = 0;
  for (auto _ : state) {
    Decide(watch, result, ++token);
    if (token % 64 == 0) {  // the reader's session takes the events in batches
      out.clear();
      stream->Take(out);
    }
  }
}
BENCHMARK(BM_AcceptedOneReader);

void BM_RefusedLogged(benchmark::State& state) {
  EventHub hub({}, nullptr);
  LogSink log([](std::string_view) {}, nullptr);
  WriteWatch watch(&hub, &log);
  Result<WriteReceipt> stale = StaleTokenRefusal("token 3 is stale", 5);
  std::int64_t token = 0;
  for (auto _ : state) Decide(watch, stale, ++token);
}
BENCHMARK(BM_RefusedLogged);

}  // namespace
}  // namespace fencekit::httpapi

BENCHMARK_MAIN();
