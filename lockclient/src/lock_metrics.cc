// RenderPrometheus: a LockMetrics snapshot in Prometheus' text exposition format.
#include <cstdio>
#include <string>

#include "fencekit/lockclient/lock_client.h"

namespace fencekit {
namespace {

void Line(std::string& out, std::string_view prefix, const char* name, const char* type,
          const char* help) {
  out.append("# HELP ").append(prefix).append("_").append(name).append(" ").append(help);
  out.append("\n# TYPE ").append(prefix).append("_").append(name).append(" ").append(type);
  out.append("\n");
}

void Value(std::string& out, std::string_view prefix, const char* name, std::string_view labels,
           std::uint64_t value) {
  out.append(prefix).append("_").append(name).append(labels).append(" ");
  out.append(std::to_string(value)).append("\n");
}

void Counter(std::string& out, std::string_view prefix, const char* name, const char* help,
             std::uint64_t value) {
  Line(out, prefix, name, "counter", help);
  Value(out, prefix, name, "", value);
}

// A label value as Prometheus wants it: backslash, quote and newline escaped.
std::string LabelValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string RenderPrometheus(const LockMetrics& m, std::string_view prefix) {
  std::string out;
  Counter(out, prefix, "acquire_attempts_total",
          "Grant attempts: each try of TryAcquire, each Acquire.", m.acquire_attempts);
  Counter(out, prefix, "grants_total", "Leases granted.", m.grants);
  Counter(out, prefix, "busy_total", "Attempts answered: held by another owner.", m.busy);
  Counter(out, prefix, "acquire_timeouts_total", "Acquire calls that gave up at their deadline.",
          m.timeouts);
  Counter(out, prefix, "renewals_total", "Extends that succeeded.", m.renewals);
  Counter(out, prefix, "renewal_failures_total",
          "Extends that failed: refused, or the lock service unreachable.", m.renewal_failures);
  Line(out, prefix, "leases_lost_total", "counter", "Held leases lost, by cause.");
  Value(out, prefix, "leases_lost_total", "{cause=\"refused\"}", m.lost_refused);
  Value(out, prefix, "leases_lost_total", "{cause=\"validity\"}", m.lost_validity);
  Value(out, prefix, "leases_lost_total", "{cause=\"marked\"}", m.lost_marked);
  // Not "counter_resets_total": Prometheus' lint refuses a name that holds its type.
  Counter(out, prefix, "token_regressions_total",
          "Grants whose service counter was below a token already seen (the service lost "
          "its data); the token was raised above it.",
          m.counter_resets);
  Counter(out, prefix, "token_checks_total", "CheckToken calls the lock service answered.",
          m.token_checks);
  Counter(out, prefix, "token_check_failures_total",
          "CheckToken calls that could not ask the lock service.", m.token_check_failures);
  Line(out, prefix, "acquire_wait_seconds", "histogram",
       "Time from the start of an Acquire to its grant or its giving up.");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < m.wait_buckets.size(); ++i) {
    cumulative += m.wait_buckets[i];
    char le[32];
    if (i < std::size(LockMetrics::kWaitBounds)) {
      std::snprintf(le, sizeof le, "{le=\"%g\"}", LockMetrics::kWaitBounds[i]);
    } else {
      std::snprintf(le, sizeof le, "{le=\"+Inf\"}");
    }
    Value(out, prefix, "acquire_wait_seconds_bucket", le, cumulative);
  }
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9f", m.wait_seconds_sum);
  out.append(prefix).append("_acquire_wait_seconds_sum ").append(sum).append("\n");
  Value(out, prefix, "acquire_wait_seconds_count", "", m.wait_count);
  if (!m.nodes.empty()) {
    struct {
      const char* name;
      const char* help;
      std::uint64_t NodeMetrics::*field;
    } per_node[] = {
        {"node_requests_total", "Script calls sent to a Redlock node.", &NodeMetrics::requests},
        {"node_granted_total", "Calls a node answered yes.", &NodeMetrics::granted},
        {"node_refused_total", "Calls a node answered no.", &NodeMetrics::refused},
        {"node_failed_total", "Calls that failed: connection refused or broken, an error.",
         &NodeMetrics::failed},
        {"node_timeouts_total", "Calls a node did not answer in time.", &NodeMetrics::timed_out},
    };
    for (const auto& f : per_node) {
      Line(out, prefix, f.name, "counter", f.help);
      for (const NodeMetrics& n : m.nodes) {
        Value(out, prefix, f.name, "{node=\"" + LabelValue(n.address) + "\"}", n.*(f.field));
      }
    }
  }
  return out;
}

}  // namespace fencekit
