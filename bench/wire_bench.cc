// What reading a batch's body costs fenced (httpapi/wire): the whole BatchFromJson (parse, the
// check that no object names a member twice, the fields), beside its parts: Boost.JSON's parse
// alone (the baseline), the duplicate-member pass alone, and the bound of the answer that is
// reserved before the batch is decided. CPU time per batch of 1000 puts (16-byte keys, 100-byte
// values), beside the milliseconds its group commit takes.
//
//   build/release/bench/wire_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <boost/json/parse.hpp>
#include <string>

#include "bodies.h"
#include "json_members.h"

namespace fencekit::wire {
namespace {

std::string Body() {
  std::string body = R"({"lock":"orders/lock","token":12,"writes":[)";
  for (int i = 0; i < 1000; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "orders/2026/%06d", i);
    body += std::string(i == 0 ? "" : ",") + R"({"op":"put","key":")" + key + R"(","value":")" +
            std::string(100, 'v') + "\"}";
  }
  return body + "]}";
}

void BM_ParseOnly(benchmark::State& state) {
  const std::string body = Body();
  for (auto _ : state) {
    boost::system::error_code ec;
    benchmark::DoNotOptimize(boost::json::parse(body, ec));
  }
}
BENCHMARK(BM_ParseOnly);

void BM_DuplicateMemberPass(benchmark::State& state) {
  const std::string body = Body();
  for (auto _ : state) benchmark::DoNotOptimize(DuplicateMember(body));
}
BENCHMARK(BM_DuplicateMemberPass);

void BM_BatchFromJson(benchmark::State& state) {
  const std::string body = Body();
  bool too_many = false;
  for (auto _ : state) benchmark::DoNotOptimize(BatchFromJson(body, 1000, &too_many));
}
BENCHMARK(BM_BatchFromJson);

void BM_BatchReceiptsBound(benchmark::State& state) {
  bool too_many = false;
  const auto batch = BatchFromJson(Body(), 1000, &too_many);
  for (auto _ : state) benchmark::DoNotOptimize(BatchReceiptsBound(batch->lock, batch->writes));
}
BENCHMARK(BM_BatchReceiptsBound);

}  // namespace
}  // namespace fencekit::wire

BENCHMARK_MAIN();
