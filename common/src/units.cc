#include "fencekit/common/units.h"

#include <charconv>
#include <string>

namespace fencekit {
namespace {

// Splits "123abc" into 123 and "abc". Fails when there is no leading number.
bool SplitNumber(std::string_view text, std::uint64_t& number, std::string_view& suffix) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return false;
  suffix = text.substr(end - text.data());
  return true;
}

// `text` in 1/`per_second` s, rounded to the nearest; `units` names the units accepted, for the
// error. Microseconds ("us") only when per_second counts them.
Result<std::uint64_t> ParseDurationIn(std::string_view text, std::uint64_t per_second,
                                      std::string_view units) {
  auto bad = Status::InvalidArgument("duration \"" + std::string(text) +
                                     "\" is invalid: write seconds (10, 1.5) or a number with a "
                                     "unit, " +
                                     std::string(units));
  // The number: digits, then optionally '.' and more digits; at most 9 of them after the point.
  std::uint64_t whole = 0, fraction = 0, scale = 1;
  std::string_view unit = text;
  if (!SplitNumber(text, whole, unit)) return bad;
  if (!unit.empty() && unit.front() == '.') {
    unit.remove_prefix(1);
    std::size_t digits = 0;
    while (digits < unit.size() && unit[digits] >= '0' && unit[digits] <= '9') {
      if (digits == 9) return bad;
      fraction = fraction * 10 + static_cast<std::uint64_t>(unit[digits] - '0');
      scale *= 10;
      ++digits;
    }
    if (digits == 0) return bad;
    unit.remove_prefix(digits);
  }
  // A bare number is seconds, as sleep(1)'s.
  std::uint64_t factor = 0;
  if (unit.empty() || unit == "s") factor = per_second;
  else if (unit == "ms") factor = per_second / 1000;
  else if (unit == "us" && per_second >= 1'000'000) factor = per_second / 1'000'000;
  else if (unit == "m") factor = 60 * per_second;
  else if (unit == "h") factor = 3600 * per_second;
  else return bad;
  // At most 2^40 ms (about 35 years).
  if (whole > ((std::uint64_t{1} << 40) * (per_second / 1000)) / factor) {
    return Status::InvalidArgument("duration \"" + std::string(text) + "\" is too long");
  }
  return whole * factor + (fraction * factor + scale / 2) / scale;
}

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  auto ms = ParseDurationIn(text, 1000, "ms, s, m or h (500ms, 2m)");
  if (!ms.ok()) return ms.status();
  return std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
}

Result<std::chrono::microseconds> ParseFineDuration(std::string_view text) {
  auto us = ParseDurationIn(text, 1'000'000, "us, ms, s, m or h (300us, 1.5ms)");
  if (!us.ok()) return us.status();
  return std::chrono::microseconds(static_cast<std::int64_t>(*us));
}

Result<std::uint64_t> ParseSize(std::string_view text) {
  std::uint64_t n = 0;
  std::string_view unit;
  auto bad = Status::InvalidArgument("size \"" + std::string(text) +
                                     "\" is invalid: write a whole number of bytes, optionally "
                                     "followed by B, KiB, MiB or GiB, for example 1MiB");
  if (!SplitNumber(text, n, unit)) return bad;
  std::uint64_t factor = 0;
  if (unit.empty() || unit == "B") factor = 1;
  else if (unit == "KiB") factor = 1024;
  else if (unit == "MiB") factor = 1024 * 1024;
  else if (unit == "GiB") factor = 1024 * 1024 * 1024;
  else return bad;
  if (n > (std::uint64_t{1} << 50) / factor) {
    return Status::InvalidArgument("size \"" + std::string(text) + "\" is too large");
  }
  return n * factor;
}

}  // namespace fencekit
