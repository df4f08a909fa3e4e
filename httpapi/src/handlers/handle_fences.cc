// A lock's fence: read it, or set it (an admin's fence administration, on its own queue).
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"
#include "fencekit/fencedstore/store.h"
#include "handlers/handler.h"
#include "handlers/handler_util.h"
#include "json_members.h"
#include "wire.h"
#include "net/work_queue.h"

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

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
  if (auto twice = wire::DuplicateMember(req.body())) {
    return error(Error::kBadBody, "the body names \"" + JsonSafeText(*twice) +
                                      "\" twice; name each member once");
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

}  // namespace fencekit::httpapi
