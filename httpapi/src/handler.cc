#include "handler.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include "auth.h"
#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "fencekit/fencedstore/store.h"
#include "health.h"
#include "ui_assets.h"
#include "wire.h"
#include "work_queue.h"
#include "write_watch.h"

namespace fencekit {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

namespace {

HttpResponse JsonResponse(http::status status, const json::object& body, unsigned version,
                          bool keep_alive) {
  HttpResponse res(status, version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = json::serialize(body);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

// The percent-decoded path segment, or nullopt when it is not validly percent-encoded.
std::optional<std::string> DecodeName(std::string_view encoded) {
  auto pct = boost::urls::make_pct_string_view(encoded);
  if (!pct) return std::nullopt;
  return pct->decode();
}

// The metrics label of a write the store refused or failed.
RefusalReason ReasonFor(Error e) {
  switch (e) {
    case Error::kStaleToken:
      return RefusalReason::kStaleToken;
    case Error::kBadKey:
      return RefusalReason::kBadKey;
    case Error::kWrongLock:
      return RefusalReason::kWrongLock;
    case Error::kWrongService:
      return RefusalReason::kWrongService;
    case Error::kUnverifiedToken:
      return RefusalReason::kUnverifiedToken;
    case Error::kVerifyUnavailable:
      return RefusalReason::kVerifyUnavailable;
    case Error::kPreconditionFailed:
      return RefusalReason::kPreconditionFailed;
    default:
      return RefusalReason::kStorageError;
  }
}

// The routes every client may ask without a bearer token: the probes and the static page.
bool IsOpenPath(std::string_view path) {
  return path == wire::kHealthPath || path == wire::kReadyPath || FindUiAsset(path) != nullptr;
}

std::string NotEncoded(std::string_view what) {
  return "the " + std::string(what) +
         " in the path is not validly percent-encoded; encode reserved bytes as %XX";
}

// True when `who` (null: no --auth, everyone may) may see that a key belongs to `lock`.
bool MaySeeLock(const Principal* who, std::string_view lock) {
  return who == nullptr || who->MayRead(lock);
}

// Drops `o`'s "lock" (and its encoding) when `who` may not read that lock.
void HideLockUnlessReadable(json::object& o, const Principal* who, std::string_view lock) {
  if (MaySeeLock(who, lock)) return;
  o.erase("lock");
  o.erase("lock_encoding");
}

// The answer to a write (or batch) the store refused or failed: the error body, with the
// fence for a stale token (also in Fencing-Highest, for clients that read only one of them),
// the bound lock for a wrong lock (when `who` may read it: otherwise neither the body nor the
// message names it), the key's version and the key for a failed precondition.
HttpResponse WriteRefusal(const Status& s, const Principal* who, std::string_view write_lock,
                          unsigned version, bool keep_alive) {
  Error e = wire::ErrorForStoreStatus(s);
  const std::string bound = s.bound_lock().value_or(std::string());
  const bool hide_bound = e == Error::kWrongLock && !MaySeeLock(who, bound);
  json::object o = wire::ErrorObject(
      e, hide_bound ? "the key is bound to a lock other than \"" + JsonSafeText(write_lock) +
                          "\", one that principal \"" + who->name +
                          "\" may not read; write the key under the lock it is bound to"
                    : s.message());
  if (e == Error::kWrongLock) {
    if (!hide_bound) wire::PutName(o, "lock", bound);
  } else if (e == Error::kPreconditionFailed) {
    o["version"] = s.current_version().value_or(0);
    wire::PutName(o, "key", s.key().value_or(std::string()));
  } else if (e == Error::kStaleToken) {
    o["highest"] = s.highest_token().value_or(0);
  }
  HttpResponse res =
      JsonResponse(static_cast<http::status>(wire::Info(e).http_status), o, version, keep_alive);
  if (e == Error::kStaleToken) {
    res.set(wire::kHighestHeader, std::to_string(s.highest_token().value_or(0)));
  }
  return res;
}

// The values of every field `name` of `req`.
std::vector<std::string_view> Fields(const HttpRequest& req, http::field name) {
  std::vector<std::string_view> out;
  for (auto [it, end] = req.equal_range(name); it != end; ++it) out.push_back(it->value());
  return out;
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

void Handler::Handle(HttpRequest&& req, Respond respond, const Principal** who_out) {
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
    return HandleBatch(req, who, respond);
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
    HttpResponse res(http::status::ok, req.version());
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(req.keep_alive());
    res.body() = metrics_->Render(store_->Stats());
    if (extra_metrics_) res.body() += extra_metrics_();
    res.prepare_payload();
    return respond(std::move(res));
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

void Handler::HandleObject(HttpRequest&& req, std::string key, Respond& respond,
                           const Principal* who) {
  std::string principal = who != nullptr ? who->name : std::string();
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto refuse = [&](Error e, RefusalReason reason, std::string_view message) {
    metrics_->CountRefused(reason);
    respond(ErrorResponse(e, message, version, keep_alive));
  };
  if (req.method() == http::verb::get || req.method() == http::verb::head) {
    auto got = store_->Get(key);
    if (!got.ok()) {
      Error e = wire::ErrorForStoreStatus(got.status());
      return respond(ErrorResponse(e, got.status().message(), version, keep_alive));
    }
    HttpResponse res(http::status::ok, version);
    res.set(http::field::content_type, "application/octet-stream");
    res.set(wire::kTokenHeader, got->token.ToString());
    if (MaySeeLock(who, got->lock)) res.set(wire::kLockHeader, wire::NameToHeader(got->lock));
    res.set(wire::kVersionHeader, std::to_string(got->version));
    res.set(http::field::etag, wire::ETag(got->version));
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
  auto tokens = req.equal_range(wire::kTokenHeader);
  std::size_t token_count = std::distance(tokens.first, tokens.second);
  if (token_count == 0) {
    return refuse(Error::kMissingToken, RefusalReason::kMissingToken,
                  "this write carries no Fencing-Token header; acquire the lock and send the "
                  "fencing token it returned, e.g. 'Fencing-Token: 42'");
  }
  if (token_count > 1) {
    return refuse(Error::kInvalidToken, RefusalReason::kInvalidToken,
                  "the Fencing-Token header was given more than once; send it exactly once");
  }
  auto token = FencingToken::Parse(tokens.first->value());
  if (!token.ok()) {
    return refuse(Error::kInvalidToken, RefusalReason::kInvalidToken, token.status().message());
  }
  if (Status bad = CheckName("key", key); !bad.ok()) {
    return refuse(Error::kBadKey, RefusalReason::kBadKey, bad.message());
  }
  std::string lock = key;
  auto locks = req.equal_range(wire::kLockHeader);
  std::size_t lock_count = std::distance(locks.first, locks.second);
  if (lock_count > 1) {
    return refuse(Error::kBadLock, RefusalReason::kBadKey,
                  "the Fencing-Lock header was given more than once; send it at most once");
  }
  if (lock_count == 1) {
    lock = std::string(locks.first->value());
    if (lock.empty()) {
      return refuse(Error::kBadLock, RefusalReason::kBadKey,
                    "the Fencing-Lock header is empty; name the lock or leave the header out to "
                    "use the key as the lock name");
    }
    if (Status bad = CheckName("lock name", lock); !bad.ok()) {
      return refuse(Error::kBadLock, RefusalReason::kBadKey, bad.message());
    }
  }
  std::string service;
  auto services = req.equal_range(wire::kServiceHeader);
  std::size_t service_count = std::distance(services.first, services.second);
  if (service_count > 1) {
    return refuse(Error::kBadService, RefusalReason::kBadService,
                  "the Fencing-Service header was given more than once; send it at most once");
  }
  if (service_count == 1) {
    service = std::string(services.first->value());
    if (Status bad = CheckServiceId(service); !bad.ok()) {
      return refuse(Error::kBadService, RefusalReason::kBadService,
                    "the Fencing-Service header is malformed: " + bad.message() +
                        "; send the service of your lease as it is");
    }
  } else if (store_->requires_service()) {
    return refuse(Error::kServiceRequired, RefusalReason::kServiceRequired,
                  "this fenced requires the identity of the lock service that granted the token "
                  "with every write (--require-service); send your lease's service in a "
                  "Fencing-Service header");
  }
  auto if_version = wire::ParsePrecondition(Fields(req, http::field::if_match),
                                            Fields(req, http::field::if_none_match));
  if (!if_version.ok()) {
    return refuse(Error::kBadPrecondition, RefusalReason::kBadPrecondition,
                  if_version.status().message());
  }
  const bool is_put = req.method() == http::verb::put;
  WriteFacts facts;
  if (hooks_.writes != nullptr) facts = {is_put, lock, key, token->value(), principal};
  WriteRequest w{is_put ? WriteRequest::Kind::kPut : WriteRequest::Kind::kDelete,
                 std::move(lock),
                 *token,
                 std::move(key),
                 is_put ? std::move(req.body()) : std::string(),
                 std::move(service),
                 std::move(principal),
                 *if_version};

  Metrics* metrics = metrics_;
  std::string write_lock = w.lock;
  store_->Submit(std::move(w), [respond = std::move(respond), metrics, version, keep_alive, is_put,
                                who, write_lock = std::move(write_lock), writes = hooks_.writes,
                                facts = std::move(facts)](Result<WriteReceipt> r) {
    if (writes != nullptr) writes->Decided(facts, r);  // the feed, the log, the write state
    if (r.ok()) {
      metrics->CountAccepted();
      auto status = is_put && r->created ? http::status::created : http::status::ok;
      json::object receipt = wire::ReceiptToJson(*r, !is_put);
      HideLockUnlessReadable(receipt, who, r->lock);
      HttpResponse res = JsonResponse(status, receipt, version, keep_alive);
      if (is_put) res.set(http::field::etag, wire::ETag(r->version));
      return respond(std::move(res));
    }
    metrics->CountRefused(ReasonFor(wire::ErrorForStoreStatus(r.status())));
    respond(WriteRefusal(r.status(), who, write_lock, version, keep_alive));
  });
}

void Handler::HandleList(const HttpRequest& req, const boost::urls::url_view& url,
                         const Principal* who, Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto error = [&](Error e, std::string_view message) {
    respond(ErrorResponse(e, message, version, keep_alive));
  };
  if (url.has_fragment()) {
    return error(Error::kBadTarget, "the listing's target has a fragment ('#'); send none");
  }
  std::optional<std::string> prefix, after;
  std::size_t limit = wire::kDefaultListLimit;
  bool has_limit = false;
  // Percent-decoded, with '+' a plus: keys may hold any bytes but controls.
  for (auto param : url.params(boost::urls::encoding_opts{})) {
    std::optional<std::string>* slot = param.key == "prefix"  ? &prefix
                                       : param.key == "after" ? &after
                                                              : nullptr;
    if (slot == nullptr && param.key != "limit") {
      return error(Error::kBadTarget, "unknown parameter \"" + JsonSafeText(param.key) +
                                          "\"; a listing takes prefix, after and limit");
    }
    if ((slot != nullptr && slot->has_value()) || (slot == nullptr && has_limit)) {
      return error(Error::kBadTarget,
                   "parameter \"" + std::string(param.key) + "\" was given more than once");
    }
    if (slot != nullptr) {
      *slot = param.value;
      if (param.value.size() > 1024) {
        return error(Error::kBadKey,
                     "\"" + std::string(param.key) + "\" is longer than a key may be (1024 bytes)");
      }
      continue;
    }
    has_limit = true;
    auto parsed = wire::ParseCount(param.value, 1);
    if (!parsed || *parsed > static_cast<std::int64_t>(wire::kMaxListLimit)) {
      return error(Error::kBadLimit,
                   "limit must be a whole number from 1 to " + std::to_string(wire::kMaxListLimit));
    }
    limit = static_cast<std::size_t>(*parsed);
  }
  if (!prefix) prefix.emplace();
  if (!after) after.emplace();
  if (who != nullptr && !who->MayRead(*prefix)) {
    metrics_->CountForbidden();
    return error(Error::kForbidden,
                 "principal \"" + who->name + "\" may not list keys under prefix \"" +
                     JsonSafeText(*prefix) +
                     "\": it needs read rights on every key under it. List under one of its read "
                     "prefixes, or an admin can grant it in the auth file (fenced --auth)");
  }
  // Up to ~1000 keys and locks of 1 KiB each: built on the long-read queue, never on an I/O
  // thread.
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  bool queued = long_reads_->TryPost([this, prefix = std::move(*prefix), after = std::move(*after),
                                      limit, version, keep_alive, who, shared_respond] {
    auto page = store_->List(prefix, after, limit);
    if (!page.ok()) {
      Error e = wire::ErrorForStoreStatus(page.status(), Error::kBadKey);
      return (*shared_respond)(ErrorResponse(e, page.status().message(), version, keep_alive));
    }
    json::object body = wire::ObjectPageToJson(*page);
    if (who != nullptr) {
      auto& objects = body["objects"].as_array();
      for (std::size_t i = 0; i < objects.size(); ++i) {
        HideLockUnlessReadable(objects[i].as_object(), who, page->objects[i].lock);
      }
    }
    (*shared_respond)(JsonResponse(http::status::ok, body, version, keep_alive));
  });
  if (!queued) RefuseLongRead("long reads", version, keep_alive, *shared_respond);
}

void Handler::HandleBatch(const HttpRequest& req, const Principal* who, Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto refuse = [&](Error e, RefusalReason reason, std::string_view message) {
    metrics_->CountRefused(reason);
    respond(ErrorResponse(e, message, version, keep_alive));
  };
  bool too_many = false;
  auto batch = wire::BatchFromJson(req.body(), wire::kMaxBatchWrites, &too_many);
  if (!batch.ok()) {
    return refuse(too_many ? Error::kBatchTooLarge : Error::kBadBody, RefusalReason::kBadBatch,
                  batch.status().message());
  }
  if (Status bad = CheckName("lock name", batch->lock); !bad.ok()) {
    return refuse(Error::kBadLock, RefusalReason::kBadKey, bad.message());
  }
  for (std::size_t i = 0; i < batch->writes.size(); ++i) {
    if (Status bad = CheckName("key of write " + std::to_string(i), batch->writes[i].key);
        !bad.ok()) {
      return refuse(Error::kBadKey, RefusalReason::kBadKey, bad.message());
    }
  }
  if (!batch->service.empty()) {
    if (Status bad = CheckServiceId(batch->service); !bad.ok()) {
      return refuse(Error::kBadService, RefusalReason::kBadService,
                    "the batch's \"service\" is malformed: " + bad.message() +
                        "; send the service of your lease as it is");
    }
  } else if (store_->requires_service()) {
    return refuse(Error::kServiceRequired, RefusalReason::kServiceRequired,
                  "this fenced requires the identity of the lock service that granted the token "
                  "with every write (--require-service); send your lease's service as the "
                  "batch's \"service\"");
  }
  if (who != nullptr) {
    auto forbidden = [&](const std::string& what) {
      metrics_->CountForbidden();
      respond(ErrorResponse(Error::kForbidden,
                            "principal \"" + who->name + "\" may not " + what +
                                "; an admin can grant it in the auth file (fenced --auth)",
                            version, keep_alive));
    };
    if (!who->MayWrite(batch->lock)) {
      return forbidden("write under lock \"" + JsonSafeText(batch->lock) + "\"");
    }
    for (const auto& w : batch->writes) {
      if (!who->MayWrite(w.key)) return forbidden("write key \"" + JsonSafeText(w.key) + "\"");
    }
  }
  std::vector<bool> is_delete;
  is_delete.reserve(batch->writes.size());
  for (const auto& w : batch->writes) is_delete.push_back(w.is_delete);
  std::vector<WriteFacts> facts;
  if (hooks_.writes != nullptr) {
    facts.reserve(batch->writes.size());
    for (const auto& w : batch->writes) {
      facts.push_back({!w.is_delete, batch->lock, w.key, batch->token.value(),
                       who != nullptr ? who->name : std::string()});
    }
  }
  std::string lock = batch->lock;
  FencingToken token = batch->token;
  Metrics* metrics = metrics_;
  store_->SubmitBatch(
      BatchRequest{std::move(batch->lock), batch->token, std::move(batch->service),
                   who != nullptr ? who->name : std::string(), std::move(batch->writes)},
      [respond = std::move(respond), metrics, version, keep_alive, lock = std::move(lock), token,
       who, is_delete = std::move(is_delete), writes = hooks_.writes,
       facts = std::move(facts)](Result<std::vector<WriteReceipt>> r) {
        if (writes != nullptr) writes->BatchDecided(facts, r);  // the feed, the log, the state
        if (r.ok()) {
          metrics->CountAccepted(r->size());
          json::object receipts = wire::BatchReceiptsToJson(lock, token, *r, is_delete);
          HideLockUnlessReadable(receipts, who, lock);
          return respond(JsonResponse(http::status::ok, receipts, version, keep_alive));
        }
        if (r.status().IsInvalidArgument()) {
          // Names and services were checked above: what is left is the store's bounds
          // (StoreOptions::max_batch_bytes, max_batch_writes).
          metrics->CountRefused(RefusalReason::kBadBatch);
          return respond(
              ErrorResponse(Error::kBatchTooLarge, r.status().message(), version, keep_alive));
        }
        metrics->CountRefused(ReasonFor(wire::ErrorForStoreStatus(r.status())));
        respond(WriteRefusal(r.status(), who, lock, version, keep_alive));
      });
}

void Handler::HandleHistory(const HttpRequest& req, const boost::urls::url_view& url,
                            Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  if (url.has_fragment()) {
    return respond(ErrorResponse(Error::kBadTarget,
                                 "the history's target has a fragment ('#'); send none", version,
                                 keep_alive));
  }
  std::size_t limit = 100;
  bool has_limit = false;
  // The listing's grammar: known parameters only, each at most once.
  for (auto param : url.params(boost::urls::encoding_opts{})) {
    if (param.key != "limit") {
      return respond(ErrorResponse(
          Error::kBadTarget,
          "unknown parameter \"" + JsonSafeText(param.key) + "\"; the history takes limit", version,
          keep_alive));
    }
    if (has_limit) {
      return respond(ErrorResponse(
          Error::kBadTarget, "parameter \"limit\" was given more than once", version, keep_alive));
    }
    has_limit = true;
    auto parsed = wire::ParseCount(param.value, 1);
    if (!parsed || *parsed > static_cast<std::int64_t>(wire::kMaxHistoryLimit)) {
      return respond(ErrorResponse(
          Error::kBadLimit,
          "limit must be a whole number from 1 to " + std::to_string(wire::kMaxHistoryLimit),
          version, keep_alive));
    }
    limit = static_cast<std::size_t>(*parsed);
  }
  // Up to ~10 MB of JSON: built on the long-read queue, never on an I/O thread.
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  bool queued = long_reads_->TryPost([this, limit, version, keep_alive, shared_respond] {
    auto history = store_->History(limit);
    if (!history.ok()) {
      return (*shared_respond)(
          ErrorResponse(Error::kStorageError, history.status().message(), version, keep_alive));
    }
    json::array decisions;
    decisions.reserve(history->size());
    for (const auto& d : *history) decisions.push_back(wire::DecisionToJson(d));
    (*shared_respond)(JsonResponse(
        http::status::ok, json::object{{"decisions", std::move(decisions)}}, version, keep_alive));
  });
  if (!queued) RefuseLongRead("long reads", version, keep_alive, *shared_respond);
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

void Handler::HandleUi(const HttpRequest& req, std::string_view path, Respond& respond) {
  const UiAsset* asset = FindUiAsset(path);
  HttpResponse res(http::status::ok, req.version());
  res.set(http::field::content_type, asset->content_type);
  // The page runs only its own script and talks only to this fenced; text from the feed is
  // never markup (app.js), and this policy would stop a script it smuggled in anyway.
  res.set("Content-Security-Policy",
          "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(req.keep_alive());
  res.body() = asset->body;
  res.prepare_payload();
  respond(std::move(res));
}

void Handler::HandleHealth(const HttpRequest& req, bool ready, Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  if (hooks_.health == nullptr) {
    return respond(
        JsonResponse(http::status::ok, json::object{{"status", "ok"}}, version, keep_alive));
  }
  auto done = [respond = std::move(respond), version, keep_alive, ready](Status s) {
    if (s.ok()) {
      return respond(
          JsonResponse(http::status::ok, json::object{{"status", "ok"}}, version, keep_alive));
    }
    HttpResponse res = ErrorResponse(ready ? Error::kNotReady : Error::kStorageError, s.message(),
                                     version, keep_alive);
    res.set(http::field::retry_after, "1");
    respond(std::move(res));
  };
  if (ready) {
    hooks_.health->CheckReady(std::move(done));
  } else {
    hooks_.health->CheckLive(std::move(done));
  }
}

void Handler::HandleFence(const HttpRequest& req, std::string lock, Respond& respond) {
  auto fence = store_->Fence(lock);
  if (!fence.ok()) {
    Error e = wire::ErrorForStoreStatus(fence.status(), Error::kBadLock);
    return respond(ErrorResponse(e, fence.status().message(), req.version(), req.keep_alive()));
  }
  json::object o;
  wire::PutName(o, "lock", lock);
  o["highest"] = fence->has_value() ? (*fence)->highest.value() : 0;
  // The lock service the fence is bound to, when it is (a service id is plain ASCII).
  if (fence->has_value() && !(*fence)->service.empty()) o["service"] = (*fence)->service;
  respond(JsonResponse(http::status::ok, o, req.version(), req.keep_alive()));
}

void Handler::HandleSetFence(const HttpRequest& req, std::string lock, const Principal* who,
                             Respond& respond) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto error = [&](Error e, std::string_view message) {
    respond(ErrorResponse(e, message, version, keep_alive));
  };
  if (who == nullptr || !who->admin) metrics_->CountForbidden();
  if (who == nullptr) {
    return error(Error::kForbidden,
                 "fence administration needs authentication: start fenced with --auth FILE and "
                 "send the token of a principal with \"admin\": true");
  }
  if (!who->admin) {
    return error(Error::kForbidden, "principal \"" + who->name +
                                        "\" may not set fences (admin only); an admin can "
                                        "grant it in the auth file (fenced --auth)");
  }
  if (Status bad = CheckName("lock name", lock); !bad.ok()) {
    return error(Error::kBadLock, bad.message());
  }
  constexpr std::string_view kBodyHint =
      "; send {\"highest\": N} with a whole number N >= 1, and optionally "
      "\"unbind_service\": true";
  boost::system::error_code ec;
  json::value body = json::parse(req.body(), ec);
  if (ec || !body.is_object()) {
    return error(Error::kBadBody, "the body is not a JSON object" + std::string(kBodyHint));
  }
  std::optional<std::int64_t> highest;
  bool unbind_service = false;
  for (const auto& field : body.as_object()) {
    if (field.key() == "highest") {
      if (!field.value().is_int64() || field.value().as_int64() < 1) {
        return error(Error::kBadBody,
                     "\"highest\" is not a whole number >= 1" + std::string(kBodyHint));
      }
      highest = field.value().as_int64();
    } else if (field.key() == "unbind_service") {
      if (!field.value().is_bool()) {
        return error(Error::kBadBody, "\"unbind_service\" must be true or false");
      }
      unbind_service = field.value().as_bool();
    } else {
      return error(Error::kBadBody,
                   "unknown field \"" + JsonSafeText(field.key()) + "\"" + std::string(kBodyHint));
    }
  }
  if (!highest) return error(Error::kBadBody, "\"highest\" is missing" + std::string(kBodyHint));
  auto token = FencingToken::FromInt(*highest);
  if (!token.ok()) return error(Error::kBadBody, token.status().message());
  // A durable write: off the I/O threads, on its own bounded queue (never behind long reads).
  auto shared_respond = std::make_shared<Respond>(std::move(respond));
  WorkQueue* queue = hooks_.fence_admin != nullptr ? hooks_.fence_admin : long_reads_;
  bool queued = queue->TryPost([this, lock = std::move(lock), token = *token, principal = who->name,
                                unbind_service, version, keep_alive, shared_respond] {
    auto decision = store_->SetFence(lock, token, principal, unbind_service);
    if (!decision.ok()) {
      Error e = wire::ErrorForStoreStatus(decision.status(), Error::kBadLock);
      return (*shared_respond)(ErrorResponse(e, decision.status().message(), version, keep_alive));
    }
    (*shared_respond)(
        JsonResponse(http::status::ok, wire::DecisionToJson(*decision), version, keep_alive));
  });
  if (!queued) RefuseLongRead("fence administrations", version, keep_alive, *shared_respond);
}

}  // namespace fencekit
