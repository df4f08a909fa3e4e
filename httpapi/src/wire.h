// The HTTP protocol of fenced as both ends speak it: routes, header names, error codes and the
// Status each maps to, the JSON of a receipt and of a decision, how names travel in JSON and in
// headers, and strict number parsing. The server (handler.cc), the store client
// (store_client.cc) and fencectl use this and nothing else, so the two ends cannot drift apart.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/common/store_types.h"
#include "fencekit/common/token.h"

namespace fencekit::wire {

// --- Routes -------------------------------------------------------------------------------
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

// --- Headers ------------------------------------------------------------------------------
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

// A bearer token as `Authorization: Bearer <token>` carries it: RFC 6750's b64token,
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=", so it cannot end or split the
// header.
bool IsBearerToken(std::string_view token);

// --- Errors -------------------------------------------------------------------------------
// Every refusal fenced answers, as the body's {"error": "<name>"}.
enum class Error {
  kStaleToken,                 // 409
  kMissingToken,               // 428
  kInvalidToken,               // 400
  kBadKey,                     // 400
  kBadLock,                    // 400
  kBadTarget,                  // 400
  kBadLimit,                   // 400
  kBadRequest,                 // 400: not parseable as HTTP
  kBadFraming,                 // 400: Transfer-Encoding
  kBadHost,                    // 400
  kNotFound,                   // 404
  kMethodNotAllowed,           // 405
  kBodyTooLarge,               // 413
  kHeadersTooLarge,            // 431
  kUnsupportedTransferCoding,  // 501
  kStorageError,               // 503
  kBusy,                       // 503: the long-read queue is full
  kTooManyConnections,         // 503
  kWrongLock,                  // 409: the key is bound to another lock (body: "lock")
  kWrongService,               // 409: the token comes from another lock service
  kUnverifiedToken,            // 403: the lock service did not confirm the token
  kVerifyUnavailable,          // 503: the lock service could not be asked
  kServiceRequired,            // 400: --require-service and no Fencing-Service
  kBadService,                 // 400: a malformed Fencing-Service
  kUnauthorized,               // 401: no or unknown bearer token
  kForbidden,                  // 403: outside the principal's rights
  kBadBody,                    // 400: a JSON body that is not what the route takes
  kPreconditionFailed,         // 412: body "version" (0: absent) and "key"
  kBadPrecondition,            // 400: a malformed If-Match or If-None-Match
  kBatchTooLarge,              // 413: more writes than one batch may have
  kTooManyStreams,             // 503: GET /v1/events beyond --max-event-streams
  kNotReady,                   // 503: GET /readyz while the store cannot take writes
};
struct ErrorInfo {
  Error error;
  std::string_view name;  // the JSON "error" value
  unsigned http_status;
  StatusCode client_code;  // what the store client reports it as
};
// One row per Error, in enum order.
std::span<const ErrorInfo> Errors();
const ErrorInfo& Info(Error e);
// The row named `name`; nullptr for a name this version does not know.
const ErrorInfo* FindError(std::string_view name);
// {"error": name, "message": message} (message made JSON-safe); callers may add fields, as
// "highest" for kStaleToken and "lock" (PutName) for kWrongLock.
boost::json::object ErrorObject(Error e, std::string_view message);
// ErrorObject serialized, with a trailing newline.
std::string ErrorBody(Error e, std::string_view message);
// How the client reads a refusal: by its error name when known, else by the HTTP status class
// (4xx: kInvalidArgument; 404: kNotFound; other: kUnavailable). `highest` is the
// Fencing-Highest header, needed for kStaleToken.
Status StatusFromReply(unsigned http_status, std::string_view body, std::string_view highest,
                       std::string_view context);
// The refusal for a store's error Status (kStaleToken, kInvalidArgument as `bad_name`, kTimeout
// as verify_unavailable, the rest as storage errors).
Error ErrorForStoreStatus(const Status& s, Error bad_name = Error::kBadKey);

// --- JSON bodies --------------------------------------------------------------------------
// o[field] = the name, or its percent-encoding with o[field + "_encoding"] = "percent" when it
// is not strict UTF-8.
void PutName(boost::json::object& o, std::string_view field, std::string_view bytes);
// The bytes PutName stored; nullopt when absent or malformed.
std::optional<std::string> GetName(const boost::json::object& o, std::string_view field);

// {"key","lock","token","version"} and, for a delete, "deleted".
boost::json::object ReceiptToJson(const WriteReceipt& r, bool is_delete);

// The body of POST /v1/batch:
//   {"lock": L, "token": N, "service": S?, "writes": [W, ...]}
//   W = {"op": "put", "key": K, "value": "UTF-8 text" | "value_base64": "...",
//        "if_version": N? | "if_absent": true?} | {"op": "delete", "key": K, ...}
// Names as PutName writes them ("key_encoding": "percent" for bytes that are not UTF-8); the
// token a whole number, or its decimal digits as a string.
struct BatchBody {
  std::string lock;
  FencingToken token;
  std::string service;  // empty when not given
  std::vector<ObjectWrite> writes;
};
// Values are sent as "value" when strict UTF-8, else as "value_base64".
std::string BatchToJson(std::string_view lock, FencingToken token, std::string_view service,
                        const std::vector<ObjectWrite>& writes);
// kInvalidArgument saying what is wrong (naming the write); `*too_many` set when there are
// more than `max_writes` writes (nothing else is then checked).
Result<BatchBody> BatchFromJson(std::string_view body, std::size_t max_writes, bool* too_many);
// The "writes" list of a batch alone (fencectl batch reads it from a file); as BatchFromJson.
Result<std::vector<ObjectWrite>> WritesFromJson(const boost::json::value& list,
                                                std::size_t max_writes, bool* too_many);
// The answer to an accepted batch: {"lock","token","writes":[{"key","version",
// "created"|"deleted"}, ...]}, and the receipts it carries (`writes` the batch sent: the
// answer must have one per write, for the same keys).
boost::json::object BatchReceiptsToJson(std::string_view lock, FencingToken token,
                                        const std::vector<WriteReceipt>& receipts,
                                        const std::vector<bool>& is_delete);
Result<std::vector<WriteReceipt>> BatchReceiptsFromJson(const boost::json::value& v,
                                                        std::string_view lock, FencingToken token,
                                                        const std::vector<ObjectWrite>& writes);

// A listing: {"objects": [{"key","lock","token","version"}, ...], "next": K?}.
boost::json::object ObjectPageToJson(const ObjectPage& page);
// kUnavailable naming what is wrong when `v` is not a listing.
Result<ObjectPage> ObjectPageFromJson(const boost::json::value& v);
boost::json::object DecisionToJson(const Decision& d);
// kUnavailable naming what is missing when `v` is not a decision.
Result<Decision> DecisionFromJson(const boost::json::value& v);

}  // namespace fencekit::wire
