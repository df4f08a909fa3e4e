#include "fencekit/common/token.h"

#include <charconv>

namespace fencekit {

Result<FencingToken> FencingToken::FromInt(std::int64_t value) {
  if (value < kMin) {
    return Status::InvalidArgument("fencing token " + std::to_string(value) +
                                   " is out of range: tokens are integers from 1 to 2^63-1");
  }
  return FencingToken(value);
}

Result<FencingToken> FencingToken::Parse(std::string_view text) {
  auto invalid = [&](std::string_view why) {
    return Status::InvalidArgument("fencing token \"" + std::string(text.substr(0, 64)) +
                                   "\" is invalid: " + std::string(why) +
                                   "; send the decimal token your lock grant returned (1 to "
                                   "9223372036854775807)");
  };
  if (text.empty()) return invalid("it is empty");
  for (char c : text) {
    if (c < '0' || c > '9') return invalid("it must contain only the digits 0-9");
  }
  if (text.size() > 1 && text[0] == '0') return invalid("it has a leading zero");
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return invalid("it is 2^63 or larger");
  if (ec != std::errc() || end != text.data() + text.size()) return invalid("it is not a number");
  if (v < kMin) return invalid("tokens start at 1");
  return FencingToken(v);
}

}  // namespace fencekit
