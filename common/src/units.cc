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

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  std::uint64_t n = 0;
  std::string_view unit;
  auto bad = Status::InvalidArgument("duration \"" + std::string(text) +
                                     "\" is invalid: write a whole number followed by ms, s, m "
                                     "or h, for example 250ms or 10s");
  if (!SplitNumber(text, n, unit)) return bad;
  std::uint64_t factor = 0;
  if (unit == "ms") factor = 1;
  else if (unit == "s") factor = 1000;
  else if (unit == "m") factor = 60'000;
  else if (unit == "h") factor = 3'600'000;
  else return bad;
  if (n > (std::uint64_t{1} << 40) / factor) {
    return Status::InvalidArgument("duration \"" + std::string(text) + "\" is too long");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(n * factor));
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
