#include "fencekit/common/text.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <cstdint>

namespace fencekit {

// RFC 3629, table 3-7 of the Unicode standard: the second byte's range depends on the first, which
// is what excludes overlong forms (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
// code points above U+10FFFF (F4 90..BF, F5..FF).
bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  auto in = [](unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; };
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (in(c, 0xC2, 0xDF)) {
      n = 2;
    } else if (in(c, 0xE0, 0xEF)) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (in(c, 0xF0, 0xF4)) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) < n || !in(p[1], lo, hi)) return false;
    for (std::size_t k = 2; k < n; ++k) {
      if (!in(p[k], 0x80, 0xBF)) return false;
    }
    p += n;
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

std::string Plural(long long n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

std::string QuotedName(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
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

std::optional<std::string> Base64Decode(std::string_view text, Base64Padding padding) {
  if (padding == Base64Padding::kRequired && text.size() % 4 != 0) return std::nullopt;
  // By hand: Boost's base64 iterators read past the end of a text whose length leaves bits over
  // (e.g. "A", or "AB=" from a peer), which a hostile etcd reply can send.
  std::size_t pad = 0;
  while (!text.empty() && text.back() == '=' && pad < 2) {
    text.remove_suffix(1);
    ++pad;
  }
  if (text.size() % 4 == 1 || (pad != 0 && (text.size() + pad) % 4 != 0)) return std::nullopt;
  auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t bits = 0;
  int nbits = 0;
  for (char c : text) {
    int v = sextet(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out += static_cast<char>((bits >> nbits) & 0xFF);
    }
  }
  return out;
}

}  // namespace fencekit
