#include "errors.h"

#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "bodies.h"
#include "fencekit/common/text.h"
#include "fencekit/fencedstore/refusal.h"
#include "fields.h"

namespace fencekit::wire {
namespace json = boost::json;

namespace {

constexpr std::array<ErrorInfo, kErrorCount> kErrors = {{
    {Error::kStaleToken, "stale_token", 409, StatusCode::kStaleToken, true},
    {Error::kMissingToken, "missing_token", 428, StatusCode::kInvalidArgument, true},
    {Error::kInvalidToken, "invalid_token", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadKey, "bad_key", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadLock, "bad_lock", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadTarget, "bad_target", 400, StatusCode::kInvalidArgument, false},
    {Error::kBadLimit, "bad_limit", 400, StatusCode::kInvalidArgument, false},
    {Error::kBadRequest, "bad_request", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadFraming, "bad_framing", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadHost, "bad_host", 400, StatusCode::kInvalidArgument, true},
    {Error::kNotFound, "not_found", 404, StatusCode::kNotFound, false},
    {Error::kMethodNotAllowed, "method_not_allowed", 405, StatusCode::kInvalidArgument, false},
    {Error::kBodyTooLarge, "body_too_large", 413, StatusCode::kInvalidArgument, true},
    {Error::kHeadersTooLarge, "headers_too_large", 431, StatusCode::kInvalidArgument, true},
    {Error::kUnsupportedTransferCoding, "unsupported_transfer_coding", 501,
     StatusCode::kInvalidArgument, true},
    {Error::kStorageError, "storage_error", 503, StatusCode::kUnavailable, true},
    {Error::kBusy, "busy", 503, StatusCode::kUnavailable, false},
    {Error::kTooManyConnections, "too_many_connections", 503, StatusCode::kUnavailable, false},
    {Error::kWrongLock, "wrong_lock", 409, StatusCode::kWrongLock, true},
    {Error::kWrongService, "wrong_service", 409, StatusCode::kWrongService, true},
    {Error::kUnverifiedToken, "unverified_token", 403, StatusCode::kUnverifiedToken, true},
    {Error::kVerifyUnavailable, "verify_unavailable", 503, StatusCode::kUnavailable, true},
    {Error::kServiceRequired, "service_required", 400, StatusCode::kInvalidArgument, true},
    {Error::kBadService, "bad_service", 400, StatusCode::kInvalidArgument, true},
    {Error::kUnauthorized, "unauthorized", 401, StatusCode::kUnauthenticated, false},
    {Error::kForbidden, "forbidden", 403, StatusCode::kPermissionDenied, false},
    {Error::kBadBody, "bad_body", 400, StatusCode::kInvalidArgument, true},
    {Error::kPreconditionFailed, "precondition_failed", 412, StatusCode::kPreconditionFailed, true},
    {Error::kBadPrecondition, "bad_precondition", 400, StatusCode::kInvalidArgument, true},
    {Error::kBatchTooLarge, "batch_too_large", 413, StatusCode::kInvalidArgument, true},
    {Error::kTooManyStreams, "too_many_streams", 503, StatusCode::kUnavailable, false},
    {Error::kNotReady, "not_ready", 503, StatusCode::kUnavailable, false},
}};

constexpr bool InEnumOrder() {
  for (std::size_t i = 0; i < kErrors.size(); ++i) {
    if (static_cast<std::size_t>(kErrors[i].error) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "kErrors must list every Error in enum order");

Status WithCode(StatusCode code, std::string message) {
  switch (code) {
    case StatusCode::kNotFound:
      return Status::NotFound(std::move(message));
    case StatusCode::kInvalidArgument:
      return Status::InvalidArgument(std::move(message));
    case StatusCode::kWrongService:
      return Status::WrongService(std::move(message));
    case StatusCode::kUnverifiedToken:
      return Status::UnverifiedToken(std::move(message));
    case StatusCode::kUnauthenticated:
      return Status::Unauthenticated(std::move(message));
    case StatusCode::kPermissionDenied:
      return Status::PermissionDenied(std::move(message));
    default:
      return Status::Unavailable(std::move(message));
  }
}

}  // namespace

std::span<const ErrorInfo> Errors() { return kErrors; }

const ErrorInfo& Info(Error e) { return kErrors[static_cast<std::size_t>(e)]; }

const ErrorInfo* FindError(std::string_view name) {
  for (const auto& info : kErrors) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

json::object ErrorObject(Error e, std::string_view message) {
  json::object o;
  o["error"] = Info(e).name;
  o["message"] = JsonSafeText(message);
  return o;
}

std::string ErrorBody(Error e, std::string_view message) {
  std::string body = json::serialize(ErrorObject(e, message));
  body += '\n';
  return body;
}

Status StatusFromReply(unsigned http_status, std::string_view body, std::string_view highest,
                       std::string_view context) {
  std::string name, message;
  std::optional<std::string> bound_lock;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    bound_lock = GetName(v.as_object(), "lock");
    if (auto* m = v.as_object().if_contains("message"); m != nullptr && m->is_string()) {
      message = std::string(m->as_string());
    }
    if (auto* e = v.as_object().if_contains("error"); e != nullptr && e->is_string()) {
      name = std::string(e->as_string());
    }
  }
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  std::string full = std::string(context) + ": " + message;
  const ErrorInfo* info = FindError(name);
  if (info == nullptr) {  // an error this version does not know: judge by the status class
    if (http_status == 404) return Status::NotFound(full);
    if (http_status >= 400 && http_status < 500 && http_status != 409) {
      return Status::InvalidArgument(full);
    }
    if (http_status != 409) return Status::Unavailable(full);
    info = &Info(Error::kStaleToken);
  }
  if (info->client_code == StatusCode::kStaleToken) {
    auto h = ParseCount(highest, 1);
    if (!h) return Status::Unavailable(full + " (with a bad Fencing-Highest)");
    return StaleTokenRefusal(full, *h);
  }
  if (info->client_code == StatusCode::kPreconditionFailed) {
    const json::value* version = v.is_object() ? v.as_object().if_contains("version") : nullptr;
    auto key = v.is_object() ? GetName(v.as_object(), "key") : std::nullopt;
    if (version == nullptr || !version->is_int64() || version->as_int64() < 0 || !key) {
      return Status::Unavailable(full + " (without the key's \"version\" and \"key\")");
    }
    return PreconditionRefusal(full, version->as_int64(), std::move(*key));
  }
  if (info->client_code == StatusCode::kWrongLock) {
    // Under --auth the server names the bound lock only to a principal that may read it.
    return WrongLockRefusal(full, bound_lock.value_or(std::string()));
  }
  return WithCode(info->client_code, full);
}

Error ErrorForStoreStatus(const Status& s, Error bad_name) {
  // A refusal the store decided is answered by its code's name, the reason its history records.
  if (const ErrorInfo* e = FindError(StatusCodeName(s.code()));
      e != nullptr && e->client_code == s.code()) {
    return e->error;
  }
  if (s.IsUnauthenticated()) return Error::kUnauthorized;
  if (s.IsPermissionDenied()) return Error::kForbidden;
  // The store answers kTimeout only when verification on advance could not ask the lock service.
  if (s.IsTimeout()) return Error::kVerifyUnavailable;
  if (s.IsInvalidArgument()) return bad_name;
  if (s.IsNotFound()) return Error::kNotFound;
  return Error::kStorageError;
}
}  // namespace fencekit::wire
