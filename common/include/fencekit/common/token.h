// FencingToken: the number a lock grant carries and a fenced write presents.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit {

// An integer in 1 .. 2^63-1 (SQLite integers are signed 64-bit). Values outside that range are
// rejected, never clamped. Thread safety: a value type.
class FencingToken {
 public:
  static constexpr std::int64_t kMin = 1;
  static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

  // The lowest token, 1.
  FencingToken() = default;

  // kInvalidArgument when `value` is outside kMin..kMax.
  static Result<FencingToken> FromInt(std::int64_t value);
  // Strict decimal: ASCII digits only (no sign, spaces, hex, exponent or leading zero), value in
  // kMin..kMax. One spelling per value, so a token reads the same in every log and proxy.
  static Result<FencingToken> Parse(std::string_view text);

  std::int64_t value() const { return value_; }
  std::string ToString() const { return std::to_string(value_); }

  friend auto operator<=>(FencingToken, FencingToken) = default;

 private:
  explicit FencingToken(std::int64_t v) : value_(v) {}
  std::int64_t value_ = kMin;
};

}  // namespace fencekit
