#include "fields.h"

#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>

namespace fencekit::wire {
namespace {

// Bytes a name keeps as they are in a path or a header.
constexpr auto kPathChars = boost::urls::unreserved_chars + '/';

}  // namespace

std::string ETag(std::int64_t version) { return "\"" + std::to_string(version) + "\""; }

Result<IfVersion> ParsePrecondition(std::span<const std::string_view> if_match,
                                    std::span<const std::string_view> if_none_match) {
  constexpr std::string_view kHint =
      "; send If-Match: \"N\" (the ETag a read returned) to write only that version, or "
      "If-None-Match: * to write only an absent key";
  if (!if_match.empty() && !if_none_match.empty()) {
    return Status::InvalidArgument("both If-Match and If-None-Match were given; send one" +
                                   std::string(kHint));
  }
  if (if_match.size() > 1 || if_none_match.size() > 1) {
    return Status::InvalidArgument("a precondition header was given more than once" +
                                   std::string(kHint));
  }
  if (!if_none_match.empty()) {
    if (if_none_match.front() != "*") {
      return Status::InvalidArgument("If-None-Match takes only * on a write" + std::string(kHint));
    }
    return IfVersion(kIfAbsent);
  }
  if (if_match.empty()) return IfVersion();
  std::string_view tag = if_match.front();
  std::optional<std::int64_t> version;
  if (tag.size() >= 3 && tag.front() == '"' && tag.back() == '"') {
    version = ParseCount(tag.substr(1, tag.size() - 2), 1);
  }
  if (!version) {
    return Status::InvalidArgument(
        "If-Match takes one strong ETag, a version in double quotes (\"12\"), not a list, *, "
        "or a weak W/ tag" +
        std::string(kHint));
  }
  return IfVersion(*version);
}

std::string NameToHeader(std::string_view name) { return boost::urls::encode(name, kPathChars); }

std::optional<std::string> NameFromHeader(std::string_view value) {
  auto pct = boost::urls::make_pct_string_view(value);
  if (!pct) return std::nullopt;
  return pct->decode();
}

std::optional<std::int64_t> ParseCount(std::string_view text, std::int64_t min) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min) return std::nullopt;
  return v;
}

bool IsBearerToken(std::string_view token) {
  std::size_t i = 0;
  for (; i < token.size(); ++i) {
    char c = token[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
    if (!ok) break;
  }
  if (i == 0) return false;
  for (; i < token.size(); ++i) {
    if (token[i] != '=') return false;
  }
  return true;
}
std::optional<std::int64_t> ParseQueryCount(std::string_view text, std::int64_t min) {
  while (text.size() > 1 && text.front() == '0') text.remove_prefix(1);
  return ParseCount(text, min);
}

}  // namespace fencekit::wire
