// The objects: a read, a fenced write (PUT, DELETE) and an atomic batch.
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "fencekit/fencedstore/refusal.h"
#include "fencekit/fencedstore/store.h"
#include "handlers/handler.h"
#include "handlers/handler_util.h"
#include "wire.h"
#include "net/write_watch.h"

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

namespace {

// The answer to a write (or batch) the store refused or failed: the error body, with the
// fence for a stale token (also in Fencing-Highest, for clients that read only one of them),
// the bound lock for a wrong lock (when `who` may read it: otherwise neither the body nor the
// message names it), the key's version and the key for a failed precondition.
HttpResponse WriteRefusal(const Status& s, const Principal* who, std::string_view write_lock,
                          unsigned version, bool keep_alive) {
  Error e = wire::ErrorForStoreStatus(s);
  const std::string bound = BoundLock(s).value_or(std::string());
  const bool hide_bound = e == Error::kWrongLock && !MaySeeLock(who, bound);
  json::object o = wire::ErrorObject(
      e, hide_bound ? "the key is bound to a lock other than \"" + JsonSafeText(write_lock) +
                          "\", one that principal \"" + who->name +
                          "\" may not read; write the key under the lock it is bound to"
                    : s.message());
  if (e == Error::kWrongLock) {
    if (!hide_bound) wire::PutName(o, "lock", bound);
  } else if (e == Error::kPreconditionFailed) {
    o["version"] = CurrentVersion(s).value_or(0);
    wire::PutName(o, "key", RefusedKey(s).value_or(std::string()));
  } else if (e == Error::kStaleToken) {
    o["highest"] = HighestToken(s).value_or(0);
  }
  HttpResponse res =
      JsonResponse(static_cast<http::status>(wire::Info(e).http_status), o, version, keep_alive);
  if (e == Error::kStaleToken) {
    res.set(wire::kHighestHeader, std::to_string(HighestToken(s).value_or(0)));
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

void Handler::HandleObject(HttpRequest&& req, std::string key, Respond& respond,
                           const Principal* who) {
  std::string principal = who != nullptr ? who->name : std::string();
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto refuse = [&](Error e, std::string_view message) {
    metrics_->CountRefused(e);
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
    return refuse(Error::kMissingToken,
                  "this write carries no Fencing-Token header; acquire the lock and send the "
                  "fencing token it returned, e.g. 'Fencing-Token: 42'");
  }
  if (token_count > 1) {
    return refuse(Error::kInvalidToken,
                  "the Fencing-Token header was given more than once; send it exactly once");
  }
  auto token = FencingToken::Parse(tokens.first->value());
  if (!token.ok()) {
    return refuse(Error::kInvalidToken, token.status().message());
  }
  if (Status bad = CheckName("key", key); !bad.ok()) {
    return refuse(Error::kBadKey, bad.message());
  }
  std::string lock = key;
  auto locks = req.equal_range(wire::kLockHeader);
  std::size_t lock_count = std::distance(locks.first, locks.second);
  if (lock_count > 1) {
    return refuse(Error::kBadLock,
                  "the Fencing-Lock header was given more than once; send it at most once");
  }
  if (lock_count == 1) {
    lock = std::string(locks.first->value());
    if (lock.empty()) {
      return refuse(Error::kBadLock,
                    "the Fencing-Lock header is empty; name the lock or leave the header out to "
                    "use the key as the lock name");
    }
    if (Status bad = CheckName("lock name", lock); !bad.ok()) {
      return refuse(Error::kBadLock, bad.message());
    }
  }
  std::string service;
  auto services = req.equal_range(wire::kServiceHeader);
  std::size_t service_count = std::distance(services.first, services.second);
  if (service_count > 1) {
    return refuse(Error::kBadService,
                  "the Fencing-Service header was given more than once; send it at most once");
  }
  if (service_count == 1) {
    service = std::string(services.first->value());
    if (Status bad = CheckServiceId(service); !bad.ok()) {
      return refuse(Error::kBadService,
                    "the Fencing-Service header is malformed: " + bad.message() +
                        "; send the service of your lease as it is");
    }
  } else if (store_->requires_service()) {
    return refuse(Error::kServiceRequired,
                  "this fenced requires the identity of the lock service that granted the token "
                  "with every write (--require-service); send your lease's service in a "
                  "Fencing-Service header");
  }
  auto if_version = wire::ParsePrecondition(Fields(req, http::field::if_match),
                                            Fields(req, http::field::if_none_match));
  if (!if_version.ok()) {
    return refuse(Error::kBadPrecondition, if_version.status().message());
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
  auto done = [respond = std::move(respond), metrics, version, keep_alive, is_put, who,
               write_lock = std::move(write_lock), writes = hooks_.writes,
               facts = std::move(facts)](Result<WriteReceipt> r) {
    if (writes != nullptr) writes->Decided(facts, r);  // the feed, the log, the write state
    if (r.ok()) {
      metrics->CountAccepted();
      auto status = is_put && r->created ? http::status::created : http::status::ok;
      // The receipt is built in a buffer on this stack: no allocation for a JSON object that
      // lives only until it is serialized.
      unsigned char scratch[1024];
      json::monotonic_resource memory(scratch, sizeof scratch);
      json::object receipt = wire::ReceiptToJson(*r, !is_put, &memory);
      HideLockUnlessReadable(receipt, who, r->lock);
      HttpResponse res = JsonResponse(status, receipt, version, keep_alive);
      if (is_put) res.set(http::field::etag, wire::ETag(r->version));
      return respond(std::move(res));
    }
    metrics->CountRefused(wire::ErrorForStoreStatus(r.status()));
    respond(WriteRefusal(r.status(), who, write_lock, version, keep_alive));
  };
  store_->Submit(std::move(w), StoreCallbacks::Counted(hooks_.store_callbacks, std::move(done)));
}

void Handler::HandleBatch(const HttpRequest& req, const Principal* who, Respond& respond,
                          std::size_t* reserved) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  auto refuse = [&](Error e, std::string_view message) {
    metrics_->CountRefused(e);
    respond(ErrorResponse(e, message, version, keep_alive));
  };
  bool too_many = false;
  auto batch = wire::BatchFromJson(req.body(), wire::kMaxBatchWrites, &too_many);
  if (!batch.ok()) {
    return refuse(too_many ? Error::kBatchTooLarge : Error::kBadBody, batch.status().message());
  }
  if (Status bad = CheckName("lock name", batch->lock); !bad.ok()) {
    return refuse(Error::kBadLock, bad.message());
  }
  for (std::size_t i = 0; i < batch->writes.size(); ++i) {
    if (Status bad = CheckName("key of write " + std::to_string(i), batch->writes[i].key);
        !bad.ok()) {
      return refuse(Error::kBadKey, bad.message());
    }
  }
  if (!batch->service.empty()) {
    if (Status bad = CheckServiceId(batch->service); !bad.ok()) {
      return refuse(Error::kBadService, "the batch's \"service\" is malformed: " + bad.message() +
                                            "; send the service of your lease as it is");
    }
  } else if (store_->requires_service()) {
    return refuse(Error::kServiceRequired,
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
  // The answer's memory, reserved before the batch is decided: once it is, its answer says so
  // whatever the budget then holds. A batch whose answer cannot be reserved is refused before
  // anything is stored.
  if (hooks_.answers != nullptr && reserved != nullptr) {
    const std::size_t bound = wire::BatchReceiptsBound(batch->lock, batch->writes);
    if (bound > ResponseBudget::kUncharged) {
      if (!hooks_.answers->TryCharge(bound)) {
        metrics_->CountAnswerRefused();
        HttpResponse busy = ErrorResponse(Error::kBusy, AnswerBudgetFull(hooks_.answers->limit()),
                                          version, keep_alive);
        busy.set(http::field::retry_after, "1");
        return respond(std::move(busy));
      }
      *reserved = bound;
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
  auto done =
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
          metrics->CountRefused(Error::kBatchTooLarge);
          return respond(
              ErrorResponse(Error::kBatchTooLarge, r.status().message(), version, keep_alive));
        }
        metrics->CountRefused(wire::ErrorForStoreStatus(r.status()));
        respond(WriteRefusal(r.status(), who, lock, version, keep_alive));
      };
  store_->SubmitBatch(
      BatchRequest{std::move(batch->lock), batch->token, std::move(batch->service),
                   who != nullptr ? who->name : std::string(), std::move(batch->writes)},
      StoreCallbacks::Counted(hooks_.store_callbacks, std::move(done)));
}

}  // namespace fencekit::httpapi
