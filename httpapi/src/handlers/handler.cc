// Handler: routing, authentication and authorization of every request, then the handling
// of each resource (handle_*.cc).
#include "handlers/handler.h"

#include <boost/url/parse.hpp>

#include "handlers/auth.h"
#include "handlers/handler_util.h"
#include "handlers/ui_assets.h"
#include "wire.h"

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

namespace {

// The percent-decoded path segment, or nullopt when it is not validly percent-encoded.
std::optional<std::string> DecodeName(std::string_view encoded) {
  auto pct = boost::urls::make_pct_string_view(encoded);
  if (!pct) return std::nullopt;
  return pct->decode();
}

// The routes every client may ask without a bearer token: the probes and the static page.
bool IsOpenPath(std::string_view path) {
  return path == wire::kHealthPath || path == wire::kReadyPath || FindUiAsset(path) != nullptr;
}

std::string NotEncoded(std::string_view what) {
  return "the " + std::string(what) +
         " in the path is not validly percent-encoded; encode reserved bytes as %XX";
}

}  // namespace

HttpResponse Handler::ErrorResponse(Error e, std::string_view message, unsigned version,
                                    bool keep_alive) {
  HttpResponse res(static_cast<http::status>(wire::Info(e).http_status), version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = wire::ErrorBody(e, message);
  res.prepare_payload();
  return res;
}

void Handler::Handle(HttpRequest&& req, Respond respond, const Principal** who_out,
                     std::size_t* reserved) {
  if (req.method() == http::verb::head) {
    // An answer to HEAD has no body, refusals included, or the client would read the body's
    // bytes as the start of the next response: keep its length, drop the bytes.
    respond = [inner = std::move(respond)](HttpResponse res) {
      if (!res.body().empty()) {
        std::size_t length = res.body().size();
        res.body().clear();
        res.content_length(length);
      }
      inner(std::move(res));
    };
  }
  auto error = [&](Error e, std::string_view message) {
    respond(ErrorResponse(e, message, req.version(), req.keep_alive()));
  };
  auto parsed = boost::urls::parse_origin_form(req.target());
  if (!parsed) {
    return error(Error::kBadTarget,
                 "the request target is not a valid path; percent-encode the key");
  }
  std::string_view path = parsed->encoded_path();
  // Who asks: every route but the probes and the page needs a known bearer token under --auth.
  const Principal* who = nullptr;
  if (auth_ != nullptr && !IsOpenPath(path)) {
    auto [first, end] = req.equal_range(http::field::authorization);
    auto count = static_cast<std::size_t>(std::distance(first, end));
    auto verdict = auth_->Authenticate(
        count != 0 ? std::string_view(first->value()) : std::string_view(), count);
    if (verdict.outcome != Authorizer::Outcome::kOk) return Unauthorized(req, verdict, respond);
    who = verdict.principal;
    if (who_out != nullptr) *who_out = who;
  }
  auto forbidden = [&](std::string_view what) {
    metrics_->CountForbidden();
    error(Error::kForbidden, "principal \"" + who->name + "\" may not " + std::string(what) +
                                 "; an admin can grant it in the auth file (fenced --auth)");
  };
  auto method_not_allowed = [&](std::string_view allow) {
    HttpResponse res =
        ErrorResponse(Error::kMethodNotAllowed,
                      "method " + std::string(req.method_string()) + " is not allowed on " +
                          std::string(path) + "; use " + std::string(allow),
                      req.version(), req.keep_alive());
    res.set(http::field::allow, allow);
    respond(std::move(res));
  };
  if (path == wire::kHistoryPath) {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    if (who != nullptr && !who->admin) return forbidden("read the history (admin only)");
    return HandleHistory(req, *parsed, respond);
  }
  if (path == wire::kObjectsPath) {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    return HandleList(req, *parsed, who, respond);
  }
  if (parsed->has_query() || parsed->has_fragment()) {
    return error(Error::kBadTarget,
                 "the path has a query ('?') or fragment ('#'); fenced takes none. If they are "
                 "part of a key, percent-encode them as %3F and %23");
  }
  if (path.starts_with(wire::kObjectsPrefix)) {
    auto key = DecodeName(path.substr(wire::kObjectsPrefix.size()));
    if (!key) return error(Error::kBadKey, NotEncoded("key"));
    const bool read = req.method() == http::verb::get || req.method() == http::verb::head;
    if (!read && req.method() != http::verb::put && req.method() != http::verb::delete_) {
      return method_not_allowed("GET, HEAD, PUT, DELETE");
    }
    if (who == nullptr) return HandleObject(std::move(req), std::move(*key), respond);
    if (read && !who->MayRead(*key)) return forbidden("read key \"" + *key + "\"");
    if (!read) {
      if (!who->MayWrite(*key)) return forbidden("write key \"" + *key + "\"");
      // The lock named (an empty one is refused as bad_lock by HandleObject).
      for (auto [it, end] = req.equal_range(wire::kLockHeader); it != end; ++it) {
        if (!it->value().empty() && !who->MayWrite(it->value())) {
          return forbidden("write under lock \"" + std::string(it->value()) + "\"");
        }
      }
    }
    return HandleObject(std::move(req), std::move(*key), respond, who);
  }
  if (path == wire::kBatchPath) {
    if (req.method() != http::verb::post) return method_not_allowed("POST");
    return HandleBatch(req, who, respond, reserved);
  }
  if (path.starts_with(wire::kFencesPrefix)) {
    if (req.method() != http::verb::get && req.method() != http::verb::put) {
      return method_not_allowed("GET, PUT");
    }
    auto lock = DecodeName(path.substr(wire::kFencesPrefix.size()));
    if (!lock) return error(Error::kBadLock, NotEncoded("lock name"));
    if (req.method() == http::verb::put) return HandleSetFence(req, std::move(*lock), who, respond);
    if (who != nullptr && !who->MayRead(*lock)) {
      return forbidden("read the fence of lock \"" + *lock + "\"");
    }
    return HandleFence(req, std::move(*lock), respond);
  }
  if (path == wire::kHealthPath || path == wire::kReadyPath) {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    return HandleHealth(req, path == wire::kReadyPath, respond);
  }
  if (path == wire::kEventsPath) {
    // Each principal sees the decisions on the keys and locks it may read (events.h).
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    if (who != nullptr && !who->admin && who->read.empty()) {
      return forbidden("read the event stream: it has no read rights, so it would see nothing");
    }
    HttpResponse res(http::status::ok, req.version());
    res.set(http::field::content_type, kEventStreamType);
    return respond(std::move(res));
  }
  if (FindUiAsset(path) != nullptr) {
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return method_not_allowed("GET, HEAD");
    }
    return HandleUi(req, path, respond);
  }
  if (path == wire::kMetricsPath) {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    if (who != nullptr && !who->admin) return forbidden("read the metrics (admin only)");
    return HandleMetrics(req, respond);
  }
  // This list is fenced's own statement of its routes: tests/openapi_check.py holds
  // docs/openapi.yaml to it.
  error(Error::kNotFound,
        "no route for " + std::string(path) +
            "; routes are /v1/objects/{key}, /v1/objects, /v1/batch, /v1/fences/{lock}, "
            "/v1/history, /v1/events, /ui, /healthz, /readyz and /metrics");
}

void Handler::Unauthorized(const HttpRequest& req, const Authorizer::Verdict& verdict,
                           Respond& respond) {
  std::string_view message =
      verdict.outcome == Authorizer::Outcome::kMissing
          ? "this server needs a bearer token: send 'Authorization: Bearer <token>'"
      : verdict.outcome == Authorizer::Outcome::kMalformed
          ? "the Authorization header is malformed; send exactly one 'Authorization: Bearer "
            "<token>' (token characters: A-Z a-z 0-9 - . _ ~ + / and trailing =)"
          : "the bearer token is not known to this server; check the token, or ask an admin to "
            "add its SHA-256 to the auth file (fenced --auth)";
  metrics_->CountUnauthorized();
  HttpResponse res = ErrorResponse(Error::kUnauthorized, message, req.version(), req.keep_alive());
  res.set(http::field::www_authenticate, verdict.outcome == Authorizer::Outcome::kMissing
                                             ? "Bearer realm=\"fenced\""
                                             : "Bearer realm=\"fenced\", error=\"invalid_token\"");
  respond(std::move(res));
}

void Handler::RefuseLongRead(std::string_view what, unsigned version, bool keep_alive,
                             Respond& respond) {
  metrics_->CountLongReadRefused();
  HttpResponse res = ErrorResponse(
      Error::kBusy, "too many " + std::string(what) + " are queued; retry in a second", version,
      keep_alive);
  res.set(http::field::retry_after, "1");
  respond(std::move(res));
}

}  // namespace fencekit::httpapi
