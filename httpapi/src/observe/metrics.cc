#include "observe/metrics.h"

#include <array>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "prometheus/prometheus_text.h"

namespace fencekit::httpapi {

void Metrics::ObserveLatency(std::chrono::steady_clock::duration d) {
  double secs = std::chrono::duration<double>(d).count();
  std::size_t i = 0;
  while (i < kLatencyBounds.size() && secs > kLatencyBounds[i]) ++i;
  latency_buckets_[i].fetch_add(1, std::memory_order_relaxed);
  latency_count_.fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns_.fetch_add(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()),
      std::memory_order_relaxed);
}

std::string Metrics::Render(const StoreStats& store) const {
  auto load = [](const auto& v) { return v.load(std::memory_order_relaxed); };
  PrometheusText out;
  out.Family("fenced_build_info", "gauge", "The version of this fenced.");
  out.Sample("fenced_build_info", PrometheusText::Label("version", FENCEKIT_VERSION), 1);
  out.Counter("fenced_writes_accepted_total", "Fenced writes (puts and deletes) durably accepted.",
              load(accepted_));
  out.Family("fenced_writes_refused_total", "counter",
             "Writes refused or failed, by the error they were answered with.");
  for (const wire::ErrorInfo& e : wire::Errors()) {
    if (!e.write_refusal) continue;
    out.Sample("fenced_writes_refused_total", PrometheusText::Label("reason", e.name),
               load(refused_[static_cast<std::size_t>(e.error)]));
  }
  std::array<std::uint64_t, kLatencyBounds.size() + 1> latency{};
  for (std::size_t i = 0; i < latency.size(); ++i) latency[i] = load(latency_buckets_[i]);
  out.Histogram("fenced_request_duration_seconds", "Time from a complete request to its response.",
                kLatencyBounds, latency, static_cast<double>(load(latency_sum_ns_)) / 1e9,
                load(latency_count_));
  // Batch sizes: buckets of powers of two, the last one open.
  std::vector<double> batch_bounds;
  for (std::size_t i = 0; i + 1 < store.batch_size_buckets.size(); ++i) {
    batch_bounds.push_back(static_cast<double>(std::uint64_t{1} << i));
  }
  out.Histogram("fenced_commit_batch_size", "Writes per group-commit transaction.", batch_bounds,
                store.batch_size_buckets,
                static_cast<double>(store.accepted + store.refused_total()), store.commits);
  out.Gauge("fenced_connections_open", "Client connections open now.", load(connections_open_));
  out.Gauge("fenced_connections_max", "The connection limit in force (--max-connections).",
            static_cast<std::int64_t>(load(max_connections_)));
  out.Counter("fenced_connections_refused_total",
              "Connections answered 503 and closed because the limit was reached.",
              load(connections_refused_));
  out.Counter("fenced_write_timeouts_total",
              "Connections closed because a response (or an event stream's bytes) was not read "
              "within --write-timeout.",
              load(write_timeouts_));
  out.Counter("fenced_long_reads_refused_total",
              "Long reads (history, listings) answered 503 busy because their queue was full.",
              load(long_reads_refused_));
  out.Counter("fenced_answers_refused_total",
              "Answers over 64 KiB answered 503 busy instead, because answers not yet read by "
              "their clients held --max-response-memory.",
              load(answers_refused_));
  out.Counter("fenced_requests_unauthorized_total",
              "Requests answered 401: no, a malformed or an unknown bearer token (--auth).",
              load(unauthorized_));
  out.Counter("fenced_requests_forbidden_total",
              "Requests answered 403 forbidden: outside the principal's rights (--auth).",
              load(forbidden_));
  out.Gauge("fenced_event_streams_open", "Event streams (GET /v1/events) open now.",
            static_cast<std::int64_t>(load(event_streams_)));
  out.Counter("fenced_event_streams_refused_total",
              "Event streams answered 503 because --max-event-streams were open.",
              load(event_streams_refused_));
  out.Counter("fenced_events_dropped_total",
              "Events an event stream skipped because its reader fell behind.",
              load(events_dropped_));
  out.Counter("fenced_log_lines_dropped_total",
              "Log lines dropped because standard error could not keep up.",
              load(log_lines_dropped_));
  out.Counter("fenced_verifications_total",
              "Calls asking the lock service to confirm a token that moves a fence up "
              "(--verify-with); concurrent writes of one token share one call.",
              store.verifications);
  out.Counter("fenced_verify_failures_total",
              "Verification calls that could not ask the lock service (their writes failed "
              "closed with 503 verify_unavailable).",
              store.verify_failures);
  out.Counter("fenced_store_write_failures_total",
              "Writes failed by a storage error (never acknowledged; 503 or 500).", store.failed);
  out.Counter("fenced_store_recoveries_total",
              "Times the store reopened and checked its database after a failed commit (a "
              "failed fsync, say); writes fail until that succeeds.",
              store.recoveries);
  out.Counter("fenced_commits_total", "Group-commit transactions committed.", store.commits);
  out.Counter("fenced_store_batch_retries_total",
              "Batches run again after PostgreSQL aborted them for a deadlock or a serialization "
              "failure with another fenced's transaction (nothing of an aborted batch is kept or "
              "acknowledged).",
              store.retries);
  out.Gauge("fenced_store_database_shared",
            "1 while another fenced was committing to the same PostgreSQL database at the "
            "writer's last look (--batch-linger auto then lingers), else 0.",
            store.database_shared ? 1 : 0);
  return out.Take();
}

}  // namespace fencekit::httpapi
