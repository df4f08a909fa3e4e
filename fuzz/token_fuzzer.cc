// Fuzz target "token": FencingToken::Parse (the Fencing-Token header, fencectl's --token) and
// wire::ParseCount (Fencing-Highest, ?limit=) against a reference of the grammar: ASCII digits
// only, no leading zero, in range. A parsed token prints back as exactly the input.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "fencekit/common/token.h"
#include "support/fuzz_support.h"
#include "wire.h"

namespace {

// The grammar written out independently of the code under test.
std::optional<std::int64_t> ReferenceCount(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (text.size() == 19 && text > "9223372036854775807") return std::nullopt;
  std::int64_t v = 0;
  for (char c : text) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fencekit::FencingToken;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto expected = ReferenceCount(text);

  auto token = FencingToken::Parse(text);
  const bool want_token = expected && *expected >= FencingToken::kMin;
  FUZZ_CHECK(token.ok() == want_token, text);
  if (token.ok()) {
    FUZZ_CHECK(token->value() == *expected, text);
    FUZZ_CHECK(token->ToString() == text, text);
    auto again = FencingToken::FromInt(token->value());
    FUZZ_CHECK(again.ok() && *again == *token, text);
  } else {
    // The message quotes at most 64 bytes of the input.
    FUZZ_CHECK(token.status().message().size() < 400, token.status().message());
  }

  for (std::int64_t min : {std::int64_t{0}, std::int64_t{1}}) {
    auto count = fencekit::wire::ParseCount(text, min);
    FUZZ_CHECK(count.has_value() == (expected && *expected >= min), text);
    if (count) FUZZ_CHECK(*count == *expected, text);
  }

  // Any 64-bit value: FromInt takes exactly 1..2^63-1, and prints what Parse reads back.
  if (size >= 8) {
    std::int64_t v;
    std::memcpy(&v, data, sizeof v);
    auto t = FencingToken::FromInt(v);
    FUZZ_CHECK(t.ok() == (v >= 1), text);
    if (t.ok()) {
      auto back = FencingToken::Parse(t->ToString());
      FUZZ_CHECK(back.ok() && back->value() == v, t->ToString());
    }
  }
  return 0;
}
