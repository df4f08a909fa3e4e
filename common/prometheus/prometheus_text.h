// PrometheusText: Prometheus' text exposition format (version 0.0.4), the one writer of every
// metric fencekit exports: fenced's GET /metrics and the lock client's RenderPrometheus.
// Internal to fencekit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fencekit {

// Each metric is written as a family: its HELP and TYPE lines, then its samples. Names are the
// caller's constants (fencekit's own, never input); label values are escaped here.
// Thread safety: not safe for concurrent use.
class PrometheusText {
 public:
  // `prefix`, when not empty, is put before every name with an underscore.
  explicit PrometheusText(std::string_view prefix = {}) : prefix_(prefix) {}

  // A counter (its name ends in _total) or a gauge, with one sample.
  void Counter(std::string_view name, std::string_view help, std::uint64_t value);
  void Gauge(std::string_view name, std::string_view help, std::int64_t value);
  // A family's HELP and TYPE ("counter", "gauge"), for Sample to follow.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // One sample of the family just begun: `labels` is Labels()' text, or empty.
  void Sample(std::string_view name, std::string_view labels, std::uint64_t value);
  // A histogram from per-bucket counts (not cumulative): `counts` has one more entry than
  // `upper_bounds`, the last for +Inf.
  void Histogram(std::string_view name, std::string_view help, std::span<const double> upper_bounds,
                 std::span<const std::uint64_t> counts, double sum, std::uint64_t count);

  // `{key="value"}` with the value escaped (backslash, quote, newline).
  static std::string Label(std::string_view key, std::string_view value);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Name(std::string_view name);

  std::string prefix_;
  std::string out_;
};

}  // namespace fencekit
