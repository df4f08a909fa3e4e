#include "metrics.h"

#include <cstdio>

#include "fencekit/fencedstore/store.h"

namespace fencekit {
namespace {

constexpr std::string_view kReasonLabels[] = {
    "stale_token",        "missing_token",     "invalid_token", "bad_key",
    "body_too_large",     "headers_too_large", "storage_error", "malformed_request",
    "bad_framing",        "wrong_lock",        "wrong_service", "unverified_token",
    "verify_unavailable", "service_required",  "bad_service",   "precondition_failed",
    "bad_batch",          "bad_precondition"};
static_assert(std::size(kReasonLabels) == static_cast<std::size_t>(RefusalReason::kCount));

void Append(std::string& out, const char* fmt, auto... args) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf, fmt, args...);
  out.append(buf, static_cast<std::size_t>(n));
}

}  // namespace

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
  std::string out;
  out += "# HELP fenced_build_info The version of this fenced.\n";
  out += "# TYPE fenced_build_info gauge\n";
  out += "fenced_build_info{version=\"" FENCEKIT_VERSION "\"} 1\n";
  out += "# HELP fenced_writes_accepted_total Fenced writes (puts and deletes) durably accepted.\n";
  out += "# TYPE fenced_writes_accepted_total counter\n";
  Append(out, "fenced_writes_accepted_total %llu\n",
         static_cast<unsigned long long>(accepted_.load(std::memory_order_relaxed)));
  out += "# HELP fenced_writes_refused_total Writes refused or failed, by reason.\n";
  out += "# TYPE fenced_writes_refused_total counter\n";
  for (std::size_t i = 0; i < refused_.size(); ++i) {
    Append(out, "fenced_writes_refused_total{reason=\"%s\"} %llu\n", kReasonLabels[i].data(),
           static_cast<unsigned long long>(refused_[i].load(std::memory_order_relaxed)));
  }
  out += "# HELP fenced_request_duration_seconds Time from a complete request to its response.\n";
  out += "# TYPE fenced_request_duration_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_buckets_.size(); ++i) {
    cumulative += latency_buckets_[i].load(std::memory_order_relaxed);
    if (i < kLatencyBounds.size()) {
      Append(out, "fenced_request_duration_seconds_bucket{le=\"%g\"} %llu\n", kLatencyBounds[i],
             static_cast<unsigned long long>(cumulative));
    } else {
      Append(out, "fenced_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
             static_cast<unsigned long long>(cumulative));
    }
  }
  Append(out, "fenced_request_duration_seconds_sum %.9f\n",
         static_cast<double>(latency_sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  Append(out, "fenced_request_duration_seconds_count %llu\n",
         static_cast<unsigned long long>(latency_count_.load(std::memory_order_relaxed)));
  out += "# HELP fenced_commit_batch_size Writes per group-commit transaction.\n";
  out += "# TYPE fenced_commit_batch_size histogram\n";
  cumulative = 0;
  for (std::size_t i = 0; i < store.batch_size_buckets.size(); ++i) {
    cumulative += store.batch_size_buckets[i];
    if (i + 1 < store.batch_size_buckets.size()) {
      Append(out, "fenced_commit_batch_size_bucket{le=\"%llu\"} %llu\n", 1ULL << i,
             static_cast<unsigned long long>(cumulative));
    } else {
      Append(out, "fenced_commit_batch_size_bucket{le=\"+Inf\"} %llu\n",
             static_cast<unsigned long long>(cumulative));
    }
  }
  Append(out, "fenced_commit_batch_size_count %llu\n",
         static_cast<unsigned long long>(store.commits));
  Append(out, "fenced_commit_batch_size_sum %llu\n",
         static_cast<unsigned long long>(store.accepted + store.refused_stale +
                                         store.refused_wrong_lock + store.refused_wrong_service +
                                         store.refused_unverified + store.refused_precondition));
  auto counter = [&](const char* name, const char* help, const auto& value) {
    std::string_view n(name);
    out.append("# HELP ").append(n).append(" ").append(help).append("\n# TYPE ").append(n);
    out.append(n.ends_with("_total") ? " counter\n" : " gauge\n").append(n).append(" ");
    out += std::to_string(value.load(std::memory_order_relaxed));
    out += '\n';
  };
  counter("fenced_connections_open", "Client connections open now.", connections_open_);
  counter("fenced_connections_max", "The connection limit in force (--max-connections).",
          max_connections_);
  counter("fenced_connections_refused_total",
          "Connections answered 503 and closed because the limit was reached.",
          connections_refused_);
  counter("fenced_write_timeouts_total",
          "Connections closed because a response (or an event stream's bytes) was not read within "
          "--write-timeout.",
          write_timeouts_);
  counter("fenced_long_reads_refused_total",
          "Long reads (history, listings) answered 503 busy because their queue was full.",
          long_reads_refused_);
  counter("fenced_answers_refused_total",
          "Answers over 64 KiB answered 503 busy instead, because answers not yet read by their "
          "clients held --max-response-memory.",
          answers_refused_);
  counter("fenced_requests_unauthorized_total",
          "Requests answered 401: no, a malformed or an unknown bearer token (--auth).",
          unauthorized_);
  counter("fenced_requests_forbidden_total",
          "Requests answered 403 forbidden: outside the principal's rights (--auth).", forbidden_);
  counter("fenced_event_streams_open", "Event streams (GET /v1/events) open now.", event_streams_);
  counter("fenced_event_streams_refused_total",
          "Event streams answered 503 because --max-event-streams were open.",
          event_streams_refused_);
  counter("fenced_events_dropped_total",
          "Events an event stream skipped because its reader fell behind.", events_dropped_);
  counter("fenced_log_lines_dropped_total",
          "Log lines dropped because standard error could not keep up.", log_lines_dropped_);
  auto store_counter = [&](const char* name, const char* help, std::uint64_t value) {
    Append(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
           static_cast<unsigned long long>(value));
  };
  store_counter("fenced_verifications_total",
                "Calls asking the lock service to confirm a token that moves a fence up "
                "(--verify-with); concurrent writes of one token share one call.",
                store.verifications);
  store_counter("fenced_verify_failures_total",
                "Verification calls that could not ask the lock service (their writes failed "
                "closed with 503 verify_unavailable).",
                store.verify_failures);
  store_counter("fenced_store_write_failures_total",
                "Writes failed by a storage error (never acknowledged; 503 or 500).", store.failed);
  store_counter("fenced_store_recoveries_total",
                "Times the store reopened and checked its database after a failed commit (a "
                "failed fsync, say); writes fail until that succeeds.",
                store.recoveries);
  out += "# HELP fenced_commits_total Group-commit transactions committed.\n";
  out += "# TYPE fenced_commits_total counter\n";
  Append(out, "fenced_commits_total %llu\n", static_cast<unsigned long long>(store.commits));
  return out;
}

}  // namespace fencekit
