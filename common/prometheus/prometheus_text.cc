#include "prometheus/prometheus_text.h"

#include <cstdio>

namespace fencekit {
namespace {

// A bucket's bound as its `le` label has always read: "0.005", "1", "64".
std::string Bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A sum to the nanosecond.
std::string Sum(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9f", v);
  return buf;
}

}  // namespace

void PrometheusText::Name(std::string_view name) {
  if (!prefix_.empty()) out_.append(prefix_).append("_");
  out_.append(name);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_.append("# HELP ");
  Name(name);
  out_.append(" ").append(help).append("\n# TYPE ");
  Name(name);
  out_.append(" ").append(type).append("\n");
}

void PrometheusText::Sample(std::string_view name, std::string_view labels, std::uint64_t value) {
  Name(name);
  out_.append(labels).append(" ").append(std::to_string(value)).append("\n");
}

void PrometheusText::Counter(std::string_view name, std::string_view help, std::uint64_t value) {
  Family(name, "counter", help);
  Sample(name, {}, value);
}

void PrometheusText::Gauge(std::string_view name, std::string_view help, std::int64_t value) {
  Family(name, "gauge", help);
  Name(name);
  out_.append(" ").append(std::to_string(value)).append("\n");
}

void PrometheusText::Histogram(std::string_view name, std::string_view help,
                               std::span<const double> upper_bounds,
                               std::span<const std::uint64_t> counts, double sum,
                               std::uint64_t count) {
  Family(name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    Sample(bucket, Label("le", i < upper_bounds.size() ? Bound(upper_bounds[i]) : "+Inf"),
           cumulative);
  }
  Name(name);
  out_.append("_sum ").append(Sum(sum)).append("\n");
  Sample(std::string(name) + "_count", {}, count);
}

std::string PrometheusText::Label(std::string_view key, std::string_view value) {
  std::string out = "{";
  out.append(key).append("=\"");
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out.append("\"}");
  return out;
}

}  // namespace fencekit
