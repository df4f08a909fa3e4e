// What operators and browsers ask: the /ui page, the probes and the metrics.
#include <boost/json/object.hpp>

#include "fencekit/fencedstore/store.h"
#include "handlers/handler.h"
#include "handlers/handler_util.h"
#include "observe/health.h"
#include "handlers/ui_assets.h"
#include "wire.h"

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;
using wire::Error;

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

void Handler::HandleMetrics(const HttpRequest& req, Respond& respond) {
  HttpResponse res(http::status::ok, req.version());
  res.set(http::field::content_type, "text/plain; version=0.0.4");
  res.keep_alive(req.keep_alive());
  res.body() = metrics_->Render(store_->Stats());
  if (extra_metrics_) res.body() += extra_metrics_();
  res.prepare_payload();
  respond(std::move(res));
}

}  // namespace fencekit::httpapi
