// Fuzz target "key_decoding": how a key or lock name travels. Percent-decoding as the server
// reads a path (/v1/objects/{key}) and the client reads Fencing-Lock (wire::NameFromHeader),
// the encoders on the other end (ObjectPath, FencePath, NameToHeader, PercentEncode), names in
// JSON (PutName/GetName, JsonSafeText), strict UTF-8 against a reference decoder, and base64
// (etcd's keys). Every encoder must be undone exactly by its decoder, for any bytes.
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "support/fuzz_support.h"
#include "wire.h"

namespace {

namespace json = boost::json;
using fencekit::fuzz::Printable;

// RFC 3629 written as a decoder: each sequence's code point must need exactly its length, and
// be neither a surrogate nor above U+10FFFF.
bool ReferenceUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < n) return false;
    for (std::size_t k = 1; k < n; ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const std::uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// What the server does with a request target's path segment (handler.cc).
std::optional<std::string> ServerDecode(std::string_view encoded) {
  auto pct = boost::urls::make_pct_string_view(encoded);
  if (!pct) return std::nullopt;
  return pct->decode();
}

// The key the server reads from a request for `path`, as handler.cc does; nullopt when the
// target does not parse or lies outside `prefix`.
std::optional<std::string> KeyFromTarget(const std::string& path, std::string_view prefix) {
  auto parsed = boost::urls::parse_origin_form(path);
  if (!parsed || parsed->has_query() || parsed->has_fragment()) return std::nullopt;
  std::string_view p = parsed->encoded_path();
  if (!p.starts_with(prefix)) return std::nullopt;
  return ServerDecode(p.substr(prefix.size()));
}

bool HeaderSafe(std::string_view v) {
  for (char ch : v) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x21 || c > 0x7E) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace wire = fencekit::wire;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The input as an encoded value: whatever it decodes to encodes to something that decodes
  // to the same bytes.
  if (auto decoded = wire::NameFromHeader(bytes)) {
    FUZZ_CHECK(wire::NameFromHeader(wire::NameToHeader(*decoded)) == decoded, bytes);
  }
  if (auto decoded = ServerDecode(bytes)) {
    FUZZ_CHECK(ServerDecode(fencekit::PercentEncode(*decoded)) == decoded, bytes);
  }

  // The input as a name: each encoding is header- and path-safe and decodes to the input.
  const std::string header = wire::NameToHeader(bytes);
  FUZZ_CHECK(HeaderSafe(header) || bytes.empty(), header);
  FUZZ_CHECK(wire::NameFromHeader(header) == std::string(bytes), header);
  const std::string object_path = wire::ObjectPath(bytes);
  FUZZ_CHECK(KeyFromTarget(object_path, wire::kObjectsPrefix) == std::string(bytes), object_path);
  const std::string fence_path = wire::FencePath(bytes);
  FUZZ_CHECK(KeyFromTarget(fence_path, wire::kFencesPrefix) == std::string(bytes), fence_path);
  FUZZ_CHECK(ServerDecode(fencekit::PercentEncode(bytes)) == std::string(bytes), bytes);

  // Names in JSON: strict UTF-8 as it is, anything else percent-encoded; both survive a trip
  // through text.
  const bool utf8 = fencekit::IsValidUtf8(bytes);
  FUZZ_CHECK(utf8 == ReferenceUtf8(bytes), bytes);
  bool encoded = false;
  std::string safe = fencekit::JsonSafeText(bytes, &encoded);
  FUZZ_CHECK(encoded == !utf8, bytes);
  FUZZ_CHECK(fencekit::IsValidUtf8(safe), safe);
  json::object o;
  wire::PutName(o, "key", bytes);
  FUZZ_CHECK(wire::GetName(o, "key") == std::string(bytes), bytes);
  boost::system::error_code ec;
  json::value back = json::parse(json::serialize(o), ec);
  FUZZ_CHECK(!ec && back.is_object(), json::serialize(o));
  FUZZ_CHECK(wire::GetName(back.as_object(), "key") == std::string(bytes), json::serialize(o));

  // The input as JSON from a peer: GetName answers or declines, and never crashes.
  json::value peer = json::parse(bytes, ec);
  if (!ec && peer.is_object()) {
    for (std::string_view field : {"key", "lock"}) {
      if (auto name = wire::GetName(peer.as_object(), field)) {
        // A name that is not strict UTF-8 can only have come percent-encoded.
        FUZZ_CHECK(fencekit::IsValidUtf8(*name) ||
                       peer.as_object().contains(std::string(field) + "_encoding"),
                   Printable(*name));
      }
    }
  }

  // Base64 (etcd's JSON gateway): a trip through it is lossless; any text is decoded or refused.
  FUZZ_CHECK(fencekit::Base64Decode(fencekit::Base64Encode(bytes)) == std::string(bytes), bytes);
  if (auto decoded = fencekit::Base64Decode(bytes)) {
    std::string_view digits = bytes;
    while (digits.ends_with('=')) digits.remove_suffix(1);
    FUZZ_CHECK(decoded->size() == digits.size() * 6 / 8, bytes);
  }

  // The name rule: only control bytes and the length make a name invalid.
  bool has_control = false;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    has_control = has_control || c < 0x20 || c == 0x7F;
  }
  const bool name_ok = fencekit::CheckName("key", bytes).ok();
  FUZZ_CHECK(name_ok == (!bytes.empty() && bytes.size() <= fencekit::kMaxNameBytes && !has_control),
             bytes);
  return 0;
}
