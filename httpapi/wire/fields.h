// The header fields of fenced's HTTP API and how their values are written and read: names
// percent-encoded, versions as entity tags, strict numbers, bearer tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/types.h"

namespace fencekit::wire {

inline constexpr std::string_view kTokenHeader = "Fencing-Token";
inline constexpr std::string_view kLockHeader = "Fencing-Lock";
inline constexpr std::string_view kHighestHeader = "Fencing-Highest";
inline constexpr std::string_view kVersionHeader = "Object-Version";
// The identity of the lock service that granted the token (Lease::service).
inline constexpr std::string_view kServiceHeader = "Fencing-Service";

// A key's version as an entity tag, `"N"` (sent as ETag, taken in If-Match).
std::string ETag(std::int64_t version);
// The precondition a write's If-Match and If-None-Match headers ask for (each value as given,
// one per field): If-Match: "N" (one strong ETag, N >= 1) for version N, If-None-Match: * for an
// absent key, nullopt for neither. kInvalidArgument saying what is accepted for anything else
// (both headers, a header given twice, a list, a weak or malformed ETag).
Result<IfVersion> ParsePrecondition(std::span<const std::string_view> if_match,
                                    std::span<const std::string_view> if_none_match);

// A name as fenced sends it in a response header: percent-encoded as in a URL path (every byte
// but A-Z a-z 0-9 - . _ ~ / becomes %XX), so no byte of it can end or split the header, and the
// value can be pasted into /v1/fences/{lock} as it is.
std::string NameToHeader(std::string_view name);
// The inverse; nullopt when `value` is not validly percent-encoded.
std::optional<std::string> NameFromHeader(std::string_view value);

// A whole decimal number >= `min`: ASCII digits only, no sign, no leading zero, no spaces.
std::optional<std::int64_t> ParseCount(std::string_view text, std::int64_t min = 0);
// A count in a query parameter (?limit=): as ParseCount, but leading zeros are taken ("01" is
// 1), as an OpenAPI integer parameter reads it.
std::optional<std::int64_t> ParseQueryCount(std::string_view text, std::int64_t min);

// A bearer token as `Authorization: Bearer <token>` carries it: RFC 6750's b64token,
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=", so it cannot end or split the
// header.
bool IsBearerToken(std::string_view token);

}  // namespace fencekit::wire
