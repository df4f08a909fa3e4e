// The long reads: a listing and the history, built on the long-read queue.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/url/url_view.hpp>

#include "fencekit/common/text.h"
#include "fencekit/fencedstore/store.h"
#include "handlers/handler.h"
#include "handlers/handler_util.h"
#include "wire.h"
#include "net/work_queue.h"

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

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
    if (param.value.empty()) continue;  // ?limit= is no limit given: the default
    auto parsed = wire::ParseQueryCount(param.value, 1);
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
    if (param.value.empty()) continue;  // ?limit= is no limit given: the default
    auto parsed = wire::ParseQueryCount(param.value, 1);
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

}  // namespace fencekit::httpapi
