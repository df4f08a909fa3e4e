#include "handler.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>
#include <charconv>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "fencekit/fencedstore/store.h"
#include "wire.h"
#include "work_queue.h"

namespace fencekit {
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

constexpr std::string_view kObjectsPrefix = "/v1/objects/";
constexpr std::string_view kFencesPrefix = "/v1/fences/";
using wire::kHighestHeader;
using wire::kLockHeader;
using wire::kTokenHeader;
using wire::kVersionHeader;

HttpResponse JsonResponse(http::status status, const json::object& body, const HttpRequest& req) {
  HttpResponse res(status, req.version());
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = json::serialize(body);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

void PutNameFields(json::object& o, std::string_view field, std::string_view bytes) {
  bool encoded = false;
  o[field] = JsonSafeText(bytes, &encoded);
  if (encoded) o[std::string(field) + "_encoding"] = "percent";
}

// The decoded path segment after `prefix`, or an error response.
bool DecodeName(std::string_view encoded, std::string_view what, std::string& out,
                std::string& error) {
  auto pct = boost::urls::make_pct_string_view(encoded);
  if (!pct) {
    error = "the " + std::string(what) +
            " in the path is not validly percent-encoded; encode reserved bytes as %XX";
    return false;
  }
  out = pct->decode();
  return true;
}

}  // namespace

HttpResponse Handler::Error(http::status status, std::string_view code, std::string_view message,
                            unsigned version, bool keep_alive) {
  json::object o;
  o["error"] = code;
  o["message"] = JsonSafeText(message);
  HttpResponse res(status, version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = json::serialize(o);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

void Handler::Handle(HttpRequest&& req, Respond respond) {
  auto error = [&](http::status status, std::string_view code, std::string_view message) {
    respond(Error(status, code, message, req.version(), req.keep_alive()));
  };
  auto parsed = boost::urls::parse_origin_form(req.target());
  if (!parsed) {
    return error(http::status::bad_request, "bad_target",
                 "the request target is not a valid path; percent-encode the key");
  }
  std::string_view path = parsed->encoded_path();
  if (path == "/v1/history") {
    if (req.method() != http::verb::get) {
      return error(http::status::method_not_allowed, "method_not_allowed",
                   "use GET on /v1/history");
    }
    return HandleHistory(req, *parsed, respond);
  }
  if (parsed->has_query() || parsed->has_fragment()) {
    return error(http::status::bad_request, "bad_target",
                 "the path has a query ('?') or fragment ('#'); fenced takes none. If they are "
                 "part of a key, percent-encode them as %3F and %23");
  }
  auto method_not_allowed = [&](std::string_view allow) {
    HttpResponse res = Error(http::status::method_not_allowed, "method_not_allowed",
                             "method " + std::string(req.method_string()) + " is not allowed on " +
                                 std::string(path) + "; use " + std::string(allow),
                             req.version(), req.keep_alive());
    res.set(http::field::allow, allow);
    respond(std::move(res));
  };
  if (path.starts_with(kObjectsPrefix)) {
    std::string key, problem;
    if (!DecodeName(path.substr(kObjectsPrefix.size()), "key", key, problem)) {
      return error(http::status::bad_request, "bad_key", problem);
    }
    if (req.method() != http::verb::get && req.method() != http::verb::head &&
        req.method() != http::verb::put && req.method() != http::verb::delete_) {
      return method_not_allowed("GET, PUT, DELETE");
    }
    return HandleObject(std::move(req), std::move(key), respond);
  }
  if (path.starts_with(kFencesPrefix)) {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    std::string lock, problem;
    if (!DecodeName(path.substr(kFencesPrefix.size()), "lock name", lock, problem)) {
      return error(http::status::bad_request, "bad_lock", problem);
    }
    return HandleFence(req, std::move(lock), respond);
  }
  if (path == "/healthz") {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    return respond(JsonResponse(http::status::ok, json::object{{"status", "ok"}}, req));
  }
  if (path == "/metrics") {
    if (req.method() != http::verb::get) return method_not_allowed("GET");
    HttpResponse res(http::status::ok, req.version());
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(req.keep_alive());
    res.body() = metrics_->Render(store_->Stats());
    res.prepare_payload();
    return respond(std::move(res));
  }
  error(http::status::not_found, "not_found",
        "no route for " + std::string(path) +
            "; routes are /v1/objects/{key}, /v1/fences/{lock}, /healthz and /metrics");
}

void Handler::HandleObject(HttpRequest&& req, std::string key, Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto refuse = [&](http::status status, std::string_view code, RefusalReason reason,
                    std::string_view message) {
    metrics_->CountRefused(reason);
    respond(Error(status, code, message, version, keep_alive));
  };
  if (req.method() == http::verb::get || req.method() == http::verb::head) {
    auto got = store_->Get(key);
    if (!got.ok()) {
      if (got.status().IsNotFound()) {
        return respond(Error(http::status::not_found, "not_found",
                             "no object is stored under this key", version, keep_alive));
      }
      if (got.status().IsInvalidArgument()) {
        return respond(Error(http::status::bad_request, "bad_key", got.status().message(), version,
                             keep_alive));
      }
      return respond(Error(http::status::service_unavailable, "storage_error",
                           got.status().message(), version, keep_alive));
    }
    HttpResponse res(http::status::ok, version);
    res.set(http::field::content_type, "application/octet-stream");
    res.set(kTokenHeader, got->token.ToString());
    res.set(kLockHeader, wire::NameToHeader(got->lock));
    res.set(kVersionHeader, std::to_string(got->version));
    res.keep_alive(keep_alive);
    if (req.method() == http::verb::get) {
      res.body() = std::move(got->value);
      res.prepare_payload();
    } else {
      res.content_length(got->value.size());
    }
    return respond(std::move(res));
  }

  // PUT or DELETE: a fenced write.
  auto tokens = req.equal_range(kTokenHeader);
  std::size_t token_count = std::distance(tokens.first, tokens.second);
  if (token_count == 0) {
    return refuse(http::status::precondition_required, "missing_token",
                  RefusalReason::kMissingToken,
                  "this write carries no Fencing-Token header; acquire the lock and send the "
                  "fencing token it returned, e.g. 'Fencing-Token: 42'");
  }
  if (token_count > 1) {
    return refuse(http::status::bad_request, "invalid_token", RefusalReason::kInvalidToken,
                  "the Fencing-Token header was given more than once; send it exactly once");
  }
  auto token = FencingToken::Parse(tokens.first->value());
  if (!token.ok()) {
    return refuse(http::status::bad_request, "invalid_token", RefusalReason::kInvalidToken,
                  token.status().message());
  }
  if (Status bad = CheckName("key", key); !bad.ok()) {
    return refuse(http::status::bad_request, "bad_key", RefusalReason::kBadKey, bad.message());
  }
  std::string lock = key;
  auto locks = req.equal_range(kLockHeader);
  std::size_t lock_count = std::distance(locks.first, locks.second);
  if (lock_count > 1) {
    return refuse(http::status::bad_request, "bad_lock", RefusalReason::kBadKey,
                  "the Fencing-Lock header was given more than once; send it at most once");
  }
  if (lock_count == 1) {
    lock = std::string(locks.first->value());
    if (lock.empty()) {
      return refuse(http::status::bad_request, "bad_lock", RefusalReason::kBadKey,
                    "the Fencing-Lock header is empty; name the lock or leave the header out to "
                    "use the key as the lock name");
    }
    if (Status bad = CheckName("lock name", lock); !bad.ok()) {
      return refuse(http::status::bad_request, "bad_lock", RefusalReason::kBadKey, bad.message());
    }
  }
  const bool is_put = req.method() == http::verb::put;
  WriteRequest w{is_put ? WriteRequest::Kind::kPut : WriteRequest::Kind::kDelete, std::move(lock),
                 *token, std::move(key), is_put ? std::move(req.body()) : std::string()};

  Metrics* metrics = metrics_;
  store_->Submit(std::move(w), [respond = std::move(respond), metrics, version, keep_alive,
                                is_put](Result<WriteReceipt> r) {
    if (r.ok()) {
      metrics->CountAccepted();
      json::object o;
      PutNameFields(o, "key", r->key);
      PutNameFields(o, "lock", r->lock);
      o["token"] = r->token.value();
      o["version"] = r->version;
      if (!is_put) o["deleted"] = r->version != 0;
      HttpResponse res(is_put && r->created ? http::status::created : http::status::ok, version);
      res.set(http::field::content_type, "application/json");
      res.keep_alive(keep_alive);
      res.body() = json::serialize(o);
      res.body() += '\n';
      res.prepare_payload();
      return respond(std::move(res));
    }
    const Status& s = r.status();
    if (s.IsStaleToken()) {
      metrics->CountRefused(RefusalReason::kStaleToken);
      json::object o;
      o["error"] = "stale_token";
      o["message"] = JsonSafeText(s.message());
      o["highest"] = s.highest_token().value_or(0);
      HttpResponse res(http::status::conflict, version);
      res.set(http::field::content_type, "application/json");
      res.set(kHighestHeader, std::to_string(s.highest_token().value_or(0)));
      res.keep_alive(keep_alive);
      res.body() = json::serialize(o);
      res.body() += '\n';
      res.prepare_payload();
      return respond(std::move(res));
    }
    if (s.IsInvalidArgument()) {
      metrics->CountRefused(RefusalReason::kBadKey);
      return respond(Error(http::status::bad_request, "bad_key", s.message(), version, keep_alive));
    }
    metrics->CountRefused(RefusalReason::kStorageError);
    respond(Error(http::status::service_unavailable, "storage_error", s.message(), version,
                  keep_alive));
  });
}

void Handler::HandleHistory(const HttpRequest& req, const boost::urls::url_view& url,
                            Respond& respond) {
  std::size_t limit = 100;
  for (auto param : url.params()) {
    if (param.key != "limit") continue;
    auto [end, ec] =
        std::from_chars(param.value.data(), param.value.data() + param.value.size(), limit);
    if (ec != std::errc() || end != param.value.data() + param.value.size() || limit == 0 ||
        limit > kMaxHistoryLimit) {
      return respond(
          Error(http::status::bad_request, "bad_limit",
                "limit must be a whole number from 1 to " + std::to_string(kMaxHistoryLimit),
                req.version(), req.keep_alive()));
    }
  }
  // Up to ~10 MB of JSON: built on the long-read queue, never on an I/O thread.
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  bool queued = long_reads_->TryPost([this, limit, version, keep_alive, shared_respond] {
    auto history = store_->History(limit);
    if (!history.ok()) {
      return (*shared_respond)(Error(http::status::service_unavailable, "storage_error",
                                     history.status().message(), version, keep_alive));
    }
    json::array decisions;
    decisions.reserve(history->size());
    for (const auto& d : *history) {
      json::object o;
      o["seq"] = d.seq;
      o["time_ms"] =
          std::chrono::duration_cast<std::chrono::milliseconds>(d.time.time_since_epoch()).count();
      o["op"] = d.op;
      PutNameFields(o, "lock", d.lock);
      o["token"] = d.token;
      PutNameFields(o, "key", d.key);
      o["accepted"] = d.accepted;
      o["highest"] = d.highest;
      decisions.push_back(std::move(o));
    }
    HttpResponse res(http::status::ok, version);
    res.set(http::field::content_type, "application/json");
    res.keep_alive(keep_alive);
    res.body() = json::serialize(json::object{{"decisions", std::move(decisions)}});
    res.body() += '\n';
    res.prepare_payload();
    (*shared_respond)(std::move(res));
  });
  if (!queued) {
    HttpResponse res =
        Error(http::status::service_unavailable, "busy",
              "too many long reads are queued; retry in a second", version, keep_alive);
    res.set(http::field::retry_after, "1");
    (*shared_respond)(std::move(res));
  }
}

void Handler::HandleFence(const HttpRequest& req, std::string lock, Respond& respond) {
  auto highest = store_->Highest(lock);
  if (!highest.ok()) {
    bool bad = highest.status().IsInvalidArgument();
    return respond(Error(bad ? http::status::bad_request : http::status::service_unavailable,
                         bad ? "bad_lock" : "storage_error", highest.status().message(),
                         req.version(), req.keep_alive()));
  }
  json::object o;
  PutNameFields(o, "lock", lock);
  o["highest"] = highest->has_value() ? (*highest)->value() : 0;
  respond(JsonResponse(http::status::ok, o, req));
}

}  // namespace fencekit
