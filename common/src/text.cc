#include "fencekit/common/text.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/binary_from_base64.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <exception>

namespace fencekit {

bool IsValidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string PercentEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string JsonSafeText(std::string_view bytes, bool* was_encoded) {
  bool ok = IsValidUtf8(bytes);
  if (was_encoded != nullptr) *was_encoded = !ok;
  return ok ? std::string(bytes) : PercentEncode(bytes);
}

std::string Base64Encode(std::string_view bytes) {
  using namespace boost::archive::iterators;
  using It = base64_from_binary<transform_width<std::string_view::const_iterator, 6, 8>>;
  std::string out(It(bytes.begin()), It(bytes.end()));
  out.append((3 - bytes.size() % 3) % 3, '=');
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  using namespace boost::archive::iterators;
  using It = transform_width<binary_from_base64<std::string_view::const_iterator>, 8, 6>;
  std::size_t pad = 0;
  while (!text.empty() && text.back() == '=' && pad < 2) {
    text.remove_suffix(1);
    ++pad;
  }
  try {
    return std::string(It(text.begin()), It(text.end()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace fencekit
