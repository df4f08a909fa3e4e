// RenderPrometheus: a LockMetrics snapshot in Prometheus' text exposition format.
#include <string>

#include "fencekit/lockclient/lock_client.h"
#include "prometheus/prometheus_text.h"

namespace fencekit {

std::string RenderPrometheus(const LockMetrics& m, std::string_view prefix) {
  PrometheusText out(prefix);
  out.Counter("acquire_attempts_total", "Grant attempts: each try of TryAcquire, each Acquire.",
              m.acquire_attempts);
  out.Counter("grants_total", "Leases granted.", m.grants);
  out.Counter("busy_total", "Attempts answered: held by another owner.", m.busy);
  out.Counter("acquire_timeouts_total", "Acquire calls that gave up at their deadline.",
              m.timeouts);
  out.Counter("renewals_total", "Extends that succeeded.", m.renewals);
  out.Counter("renewal_failures_total",
              "Extends that failed: refused, or the lock service unreachable.", m.renewal_failures);
  out.Family("leases_lost_total", "counter", "Held leases lost, by cause.");
  out.Sample("leases_lost_total", PrometheusText::Label("cause", "refused"), m.lost_refused);
  out.Sample("leases_lost_total", PrometheusText::Label("cause", "validity"), m.lost_validity);
  out.Sample("leases_lost_total", PrometheusText::Label("cause", "marked"), m.lost_marked);
  // Not "counter_resets_total": Prometheus' lint refuses a name that holds its type.
  out.Counter("token_regressions_total",
              "Grants whose service counter was below a token already seen (the service lost "
              "its data); the token was raised above it.",
              m.counter_resets);
  out.Counter("token_checks_total", "CheckToken calls the lock service answered.", m.token_checks);
  out.Counter("token_check_failures_total", "CheckToken calls that could not ask the lock service.",
              m.token_check_failures);
  out.Histogram("acquire_wait_seconds",
                "Time from the start of an Acquire to its grant or its giving up.",
                LockMetrics::kWaitBounds, m.wait_buckets, m.wait_seconds_sum, m.wait_count);
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
      out.Family(f.name, "counter", f.help);
      for (const NodeMetrics& n : m.nodes) {
        out.Sample(f.name, PrometheusText::Label("node", n.address), n.*(f.field));
      }
    }
  }
  return out.Take();
}

}  // namespace fencekit
