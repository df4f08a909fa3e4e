// Metrics: counters and histograms for GET /metrics, in Prometheus text format.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "wire.h"

namespace fencekit {
struct StoreStats;
}  // namespace fencekit

namespace fencekit::httpapi {

// Thread safety: every method is safe for concurrent use (relaxed atomics).
class Metrics {
 public:
  void CountAccepted(std::uint64_t writes = 1) {
    accepted_.fetch_add(writes, std::memory_order_relaxed);
  }
  // A write (or a request that might have been one) refused with `e`, a row of wire's error
  // table whose write_refusal is set: counted as fenced_writes_refused_total{reason=name}.
  void CountRefused(wire::Error e) {
    refused_[static_cast<std::size_t>(e)].fetch_add(1, std::memory_order_relaxed);
  }
  void ObserveLatency(std::chrono::steady_clock::duration d);
  void ConnectionOpened() { connections_open_.fetch_add(1, std::memory_order_relaxed); }
  void ConnectionClosed() { connections_open_.fetch_sub(1, std::memory_order_relaxed); }
  void CountConnectionRefused() { connections_refused_.fetch_add(1, std::memory_order_relaxed); }
  void CountWriteTimeout() { write_timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void CountLongReadRefused() { long_reads_refused_.fetch_add(1, std::memory_order_relaxed); }
  // Answers over 64 KiB replaced by 503 busy: --max-response-memory was held by unread answers.
  void CountAnswerRefused() { answers_refused_.fetch_add(1, std::memory_order_relaxed); }
  // Requests refused by authentication (401) or authorization (403), whatever their route.
  void CountUnauthorized() { unauthorized_.fetch_add(1, std::memory_order_relaxed); }
  void CountForbidden() { forbidden_.fetch_add(1, std::memory_order_relaxed); }
  void SetMaxConnections(std::uint64_t n) { max_connections_.store(n, std::memory_order_relaxed); }
  // The event feed (GET /v1/events): streams open now, streams refused at the limit, events a
  // slow reader skipped.
  void SetEventStreams(std::uint64_t n) { event_streams_.store(n, std::memory_order_relaxed); }
  void CountEventStreamRefused() { event_streams_refused_.fetch_add(1, std::memory_order_relaxed); }
  void CountEventsDropped(std::uint64_t n) {
    events_dropped_.fetch_add(n, std::memory_order_relaxed);
  }
  // Log lines dropped because the log could not keep up (log_sink.h).
  void CountLogLinesDropped(std::uint64_t n) {
    log_lines_dropped_.fetch_add(n, std::memory_order_relaxed);
  }
  // The whole exposition, with the store's commit and verification statistics appended.
  std::string Render(const StoreStats& store) const;

 private:
  static constexpr std::array<double, 12> kLatencyBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0};
  std::atomic<std::uint64_t> accepted_{0};
  std::array<std::atomic<std::uint64_t>, wire::kErrorCount> refused_{};
  std::array<std::atomic<std::uint64_t>, kLatencyBounds.size() + 1> latency_buckets_{};
  std::atomic<std::uint64_t> latency_count_{0};
  std::atomic<std::uint64_t> latency_sum_ns_{0};
  std::atomic<std::int64_t> connections_open_{0};
  std::atomic<std::uint64_t> connections_refused_{0};
  std::atomic<std::uint64_t> max_connections_{0};
  std::atomic<std::uint64_t> write_timeouts_{0};
  std::atomic<std::uint64_t> long_reads_refused_{0};
  std::atomic<std::uint64_t> answers_refused_{0};
  std::atomic<std::uint64_t> unauthorized_{0};
  std::atomic<std::uint64_t> forbidden_{0};
  std::atomic<std::uint64_t> event_streams_{0};
  std::atomic<std::uint64_t> event_streams_refused_{0};
  std::atomic<std::uint64_t> events_dropped_{0};
  std::atomic<std::uint64_t> log_lines_dropped_{0};
};

}  // namespace fencekit::httpapi
