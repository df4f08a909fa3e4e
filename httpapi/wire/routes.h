// The routes of fenced's HTTP API, and the paths both ends build.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fencekit::wire {

inline constexpr std::string_view kObjectsPrefix = "/v1/objects/";
// GET: a listing (?prefix=P&after=K&limit=N).
inline constexpr std::string_view kObjectsPath = "/v1/objects";
// POST: an atomic batch of writes under one grant.
inline constexpr std::string_view kBatchPath = "/v1/batch";
// A listing's limit when none is given, and the most it may ask for.
inline constexpr std::size_t kDefaultListLimit = 100;
inline constexpr std::size_t kMaxListLimit = 1000;
// The most writes one batch may have.
inline constexpr std::size_t kMaxBatchWrites = 1000;
inline constexpr std::string_view kFencesPrefix = "/v1/fences/";
inline constexpr std::string_view kHistoryPath = "/v1/history";
inline constexpr std::string_view kHealthPath = "/healthz";
inline constexpr std::string_view kMetricsPath = "/metrics";
// The store's decisions as Server-Sent Events, the page that draws them, and readiness.
inline constexpr std::string_view kEventsPath = "/v1/events";
inline constexpr std::string_view kUiPath = "/ui";
inline constexpr std::string_view kReadyPath = "/readyz";
// Most decisions one history read returns.
inline constexpr std::size_t kMaxHistoryLimit = 10000;
// The path of a key or a lock, percent-encoded so that any bytes survive.
std::string ObjectPath(std::string_view key);
// The target of a listing; `limit` 0 leaves it to the server.
std::string ListTarget(std::string_view prefix, std::string_view after, std::size_t limit);
std::string FencePath(std::string_view lock);

}  // namespace fencekit::wire
