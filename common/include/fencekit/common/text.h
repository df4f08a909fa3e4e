// Byte strings shown as text: how fencekit puts arbitrary keys and values into JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fencekit {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates (U+D800..DFFF), nothing above
// U+10FFFF. What strict JSON decoders accept.
bool IsValidUtf8(std::string_view bytes);
// RFC 3986 percent-encoding of every byte outside the unreserved set (A-Z a-z 0-9 - . _ ~).
std::string PercentEncode(std::string_view bytes);
// `bytes` itself when valid UTF-8, else PercentEncode(bytes) and *was_encoded = true.
std::string JsonSafeText(std::string_view bytes, bool* was_encoded = nullptr);
// "1 run", "2 runs": `n` and `noun`, with an s unless n is 1 (for messages).
std::string Plural(long long n, std::string_view noun);
// `bytes` in double quotes, each byte outside printable ASCII, and each quote and backslash, as
// \xNN: how the guards' refusals name a lock or fence key ("order-1", "caf\xc3\xa9").
std::string QuotedName(std::string_view bytes);
// RFC 4648 base64 with padding: how etcd's JSON gateway carries keys and values.
std::string Base64Encode(std::string_view bytes);
enum class Base64Padding {
  kOptional,  // "QQ" and "QQ==" both decode (etcd's gateway pads; a hostile peer may not)
  kRequired,  // the length is a multiple of 4: "QQ" is refused
};
// The bytes `text` encodes; nullopt when it is not base64 (or lacks required padding).
std::optional<std::string> Base64Decode(std::string_view text,
                                        Base64Padding padding = Base64Padding::kOptional);

}  // namespace fencekit
