#include "wire.h"

#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>

#include "fencekit/common/text.h"

namespace fencekit::wire {
namespace json = boost::json;

namespace {

constexpr auto kPathChars = boost::urls::unreserved_chars + '/';

constexpr std::array<ErrorInfo, 29> kErrors = {{
    {Error::kStaleToken, "stale_token", 409, StatusCode::kStaleToken},
    {Error::kMissingToken, "missing_token", 428, StatusCode::kInvalidArgument},
    {Error::kInvalidToken, "invalid_token", 400, StatusCode::kInvalidArgument},
    {Error::kBadKey, "bad_key", 400, StatusCode::kInvalidArgument},
    {Error::kBadLock, "bad_lock", 400, StatusCode::kInvalidArgument},
    {Error::kBadTarget, "bad_target", 400, StatusCode::kInvalidArgument},
    {Error::kBadLimit, "bad_limit", 400, StatusCode::kInvalidArgument},
    {Error::kBadRequest, "bad_request", 400, StatusCode::kInvalidArgument},
    {Error::kBadFraming, "bad_framing", 400, StatusCode::kInvalidArgument},
    {Error::kBadHost, "bad_host", 400, StatusCode::kInvalidArgument},
    {Error::kNotFound, "not_found", 404, StatusCode::kNotFound},
    {Error::kMethodNotAllowed, "method_not_allowed", 405, StatusCode::kInvalidArgument},
    {Error::kBodyTooLarge, "body_too_large", 413, StatusCode::kInvalidArgument},
    {Error::kHeadersTooLarge, "headers_too_large", 431, StatusCode::kInvalidArgument},
    {Error::kUnsupportedTransferCoding, "unsupported_transfer_coding", 501,
     StatusCode::kInvalidArgument},
    {Error::kStorageError, "storage_error", 503, StatusCode::kUnavailable},
    {Error::kBusy, "busy", 503, StatusCode::kUnavailable},
    {Error::kTooManyConnections, "too_many_connections", 503, StatusCode::kUnavailable},
    {Error::kWrongLock, "wrong_lock", 409, StatusCode::kWrongLock},
    {Error::kWrongService, "wrong_service", 409, StatusCode::kWrongService},
    {Error::kUnverifiedToken, "unverified_token", 403, StatusCode::kUnverifiedToken},
    {Error::kVerifyUnavailable, "verify_unavailable", 503, StatusCode::kUnavailable},
    {Error::kServiceRequired, "service_required", 400, StatusCode::kInvalidArgument},
    {Error::kBadService, "bad_service", 400, StatusCode::kInvalidArgument},
    {Error::kUnauthorized, "unauthorized", 401, StatusCode::kUnauthenticated},
    {Error::kForbidden, "forbidden", 403, StatusCode::kPermissionDenied},
    {Error::kBadBody, "bad_body", 400, StatusCode::kInvalidArgument},
    {Error::kTooManyStreams, "too_many_streams", 503, StatusCode::kUnavailable},
    {Error::kNotReady, "not_ready", 503, StatusCode::kUnavailable},
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

std::string ObjectPath(std::string_view key) {
  return std::string(kObjectsPrefix) + boost::urls::encode(key, boost::urls::unreserved_chars);
}

std::string FencePath(std::string_view lock) {
  return std::string(kFencesPrefix) + boost::urls::encode(lock, boost::urls::unreserved_chars);
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
    return Status::StaleToken(full, *h);
  }
  if (info->client_code == StatusCode::kWrongLock) {
    if (!bound_lock) return Status::Unavailable(full + " (without the bound \"lock\")");
    return Status::WrongLock(full, std::move(*bound_lock));
  }
  return WithCode(info->client_code, full);
}

Error ErrorForStoreStatus(const Status& s, Error bad_name) {
  if (s.IsStaleToken()) return Error::kStaleToken;
  if (s.IsWrongLock()) return Error::kWrongLock;
  if (s.IsWrongService()) return Error::kWrongService;
  if (s.IsUnverifiedToken()) return Error::kUnverifiedToken;
  if (s.IsUnauthenticated()) return Error::kUnauthorized;
  if (s.IsPermissionDenied()) return Error::kForbidden;
  // The store answers kTimeout only when verification on advance could not ask the lock service.
  if (s.IsTimeout()) return Error::kVerifyUnavailable;
  if (s.IsInvalidArgument()) return bad_name;
  if (s.IsNotFound()) return Error::kNotFound;
  return Error::kStorageError;
}

void PutName(json::object& o, std::string_view field, std::string_view bytes) {
  bool encoded = false;
  o[field] = JsonSafeText(bytes, &encoded);
  if (encoded) o[std::string(field) + "_encoding"] = "percent";
}

std::optional<std::string> GetName(const json::object& o, std::string_view field) {
  auto* v = o.if_contains(field);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  std::string s(v->as_string());
  auto* enc = o.if_contains(std::string(field) + "_encoding");
  if (enc == nullptr) return s;
  if (!enc->is_string() || enc->as_string() != "percent") return std::nullopt;
  auto pct = boost::urls::make_pct_string_view(s);
  if (!pct) return std::nullopt;
  return pct->decode();
}

json::object ReceiptToJson(const WriteReceipt& r, bool is_delete) {
  json::object o;
  PutName(o, "key", r.key);
  PutName(o, "lock", r.lock);
  o["token"] = r.token.value();
  o["version"] = r.version;
  if (is_delete) o["deleted"] = r.version != 0;
  return o;
}

json::object DecisionToJson(const Decision& d) {
  json::object o;
  o["seq"] = d.seq;
  o["time_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(d.time.time_since_epoch()).count();
  o["op"] = d.op;
  PutName(o, "lock", d.lock);
  o["token"] = d.token;
  PutName(o, "key", d.key);
  o["accepted"] = d.accepted;
  o["highest"] = d.highest;
  if (!d.reason.empty()) o["reason"] = d.reason;
  if (!d.principal.empty()) PutName(o, "principal", d.principal);
  return o;
}

Result<Decision> DecisionFromJson(const json::value& v) {
  const json::object* o = v.if_object();
  if (o == nullptr) return Status::Unavailable("a history entry is not a JSON object");
  auto number = [&](std::string_view f) -> std::optional<std::int64_t> {
    auto* n = o->if_contains(f);
    if (n == nullptr || !n->is_int64()) return std::nullopt;
    return n->as_int64();
  };
  auto seq = number("seq"), time_ms = number("time_ms"), token = number("token"),
       highest = number("highest");
  auto op = GetName(*o, "op"), lock = GetName(*o, "lock"), key = GetName(*o, "key");
  auto* accepted = o->if_contains("accepted");
  if (!seq || !time_ms || !token || !highest || !op || !lock || !key || accepted == nullptr ||
      !accepted->is_bool()) {
    return Status::Unavailable(
        "a history entry lacks one of seq, time_ms, op, lock, token, key, accepted, highest");
  }
  Decision d;
  d.seq = *seq;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(*time_ms));
  d.op = std::move(*op);
  d.lock = std::move(*lock);
  d.token = *token;
  d.key = std::move(*key);
  d.accepted = accepted->as_bool();
  d.highest = *highest;
  // Optional: absent when accepted (reason) or unknown (principal).
  if (auto* reason = o->if_contains("reason"); reason != nullptr) {
    if (!reason->is_string()) {
      return Status::Unavailable("a history entry's reason is not a string");
    }
    d.reason = std::string(reason->as_string());
  }
  if (o->contains("principal")) {
    auto principal = GetName(*o, "principal");
    if (!principal) return Status::Unavailable("a history entry's principal is malformed");
    d.principal = std::move(*principal);
  }
  return d;
}

}  // namespace fencekit::wire
