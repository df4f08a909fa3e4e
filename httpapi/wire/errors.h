// Every refusal fenced answers: one table of name, HTTP status, the client's StatusCode and
// whether the metrics count it; and how each end turns a refusal into the other's terms.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit::wire {

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
// The one table of refusals: each row's name is the body's "error", the reason a store's
// history records (for the refusals a store decides, the name of their StatusCode) and the
// `reason` label of fenced_writes_refused_total.
struct ErrorInfo {
  Error error;
  std::string_view name;  // the JSON "error" value
  unsigned http_status;
  StatusCode client_code;  // what the store client reports it as
  // Counted in fenced_writes_refused_total{reason="<name>"}: a write (or a request that might
  // have been one) refused before or by the store.
  bool write_refusal;
};
inline constexpr std::size_t kErrorCount = static_cast<std::size_t>(Error::kNotReady) + 1;
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

}  // namespace fencekit::wire
