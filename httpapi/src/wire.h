// What fenced and its client agree on beyond HTTP itself: header names and how a name (key or
// lock) travels in a response header.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fencekit::wire {

inline constexpr std::string_view kTokenHeader = "Fencing-Token";
inline constexpr std::string_view kLockHeader = "Fencing-Lock";
inline constexpr std::string_view kHighestHeader = "Fencing-Highest";
inline constexpr std::string_view kVersionHeader = "Object-Version";

// A name as fenced sends it in a response header: percent-encoded as in a URL path (every byte
// but A-Z a-z 0-9 - . _ ~ / becomes %XX), so no byte of it can end or split the header, and the
// value can be pasted into /v1/fences/{lock} as it is.
std::string NameToHeader(std::string_view name);
// The inverse; nullopt when `value` is not validly percent-encoded.
std::optional<std::string> NameFromHeader(std::string_view value);

}  // namespace fencekit::wire
