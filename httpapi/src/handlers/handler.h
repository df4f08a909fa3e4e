// Handler: the HTTP semantics of fenced (routing, validation, status codes), separate from
// sockets so it can be tested and read on its own.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/url/url_view.hpp>
#include <functional>
#include <string_view>

#include "handlers/auth.h"
#include "net/response_budget.h"
#include "net/store_callbacks.h"
#include "observe/metrics.h"
#include "wire.h"

namespace fencekit {
class FencedStore;
}  // namespace fencekit

namespace fencekit::httpapi {

class HealthChecker;
class WorkQueue;
class WriteWatch;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// The Content-Type of the answer to GET /v1/events. The handler answers an admitted request
// with a 200 of this type and no body; the session then streams the events (session.h).
inline constexpr std::string_view kEventStreamType = "text/event-stream";

// What the server adds to the routes; each may be null (then: no decision hook, and /healthz
// and /readyz answer without asking the database).
struct HandlerHooks {
  WriteWatch* writes = nullptr;     // told every write's result (write_watch.h)
  HealthChecker* health = nullptr;  // answers /healthz and /readyz (health.h)
  // Runs fence administration (PUT /v1/fences/{lock}), so that it never waits behind long
  // reads; null: the long-read queue runs it.
  WorkQueue* fence_admin = nullptr;
  // The memory of answers not yet read (ServerOptions::max_response_memory): a batch reserves
  // its receipts' bound there before the store decides it. Null: no reservation.
  ResponseBudget* answers = nullptr;
  // Counts the write callbacks given to the store and not yet done with (store_callbacks.h).
  // Null: not counted.
  StoreCallbacks* store_callbacks = nullptr;
};

// Thread safety: safe for concurrent use; the store and metrics must outlive it.
class Handler {
 public:
  using Respond = std::function<void(HttpResponse)>;

  // `long_reads` runs the reads too slow for an I/O thread (the history) and fence
  // administration. `auth` null: no authentication, every route open but fence administration.
  // `extra_metrics`, when set, is appended to GET /metrics (ServerOptions::extra_metrics).
  Handler(FencedStore* store, Metrics* metrics, WorkQueue* long_reads,
          const Authorizer* auth = nullptr, std::function<std::string()> extra_metrics = {},
          HandlerHooks hooks = {})
      : store_(store),
        metrics_(metrics),
        long_reads_(long_reads),
        auth_(auth),
        extra_metrics_(std::move(extra_metrics)),
        hooks_(hooks) {}

  // Answers `req` through `respond`, exactly once: synchronously for short reads and refusals,
  // from the store's writer thread for writes, from a long-read worker for the history (503
  // "busy" when its queue is full), from a health probe for /healthz and /readyz. `who`, when
  // given, is set before Handle returns to the authenticated principal (null without --auth or
  // before authentication), for the access log and the event stream's filter.
  // `reserved`, when given, is set before Handle returns to the bytes of `answers` reserved for
  // this request's answer (a batch's receipts, reserved before the store decides the batch, so
  // that a decided write is never answered "busy, nothing stored"; when they cannot be
  // reserved, the batch is refused busy before anything is stored). The caller then owns them:
  // it charges the answer against them, and releases what is left.
  void Handle(HttpRequest&& req, Respond respond, const Principal** who = nullptr,
              std::size_t* reserved = nullptr);

  // The JSON error response for `e` (wire.h): its HTTP status, {"error", "message"}.
  static HttpResponse ErrorResponse(wire::Error e, std::string_view message, unsigned version,
                                    bool keep_alive);

 private:
  // `who`: the authenticated client, null without --auth.
  void HandleObject(HttpRequest&& req, std::string key, Respond& respond,
                    const Principal* who = nullptr);
  void HandleFence(const HttpRequest& req, std::string lock, Respond& respond);
  void Unauthorized(const HttpRequest& req, const Authorizer::Verdict& verdict, Respond& respond);
  void HandleSetFence(const HttpRequest& req, std::string lock, const Principal* who,
                      Respond& respond);
  void HandleHistory(const HttpRequest& req, const boost::urls::url_view& url, Respond& respond);
  // GET /v1/objects?prefix=&after=&limit=: on the long-read queue.
  void HandleList(const HttpRequest& req, const boost::urls::url_view& url, const Principal* who,
                  Respond& respond);
  // POST /v1/batch: several writes under one grant, all or none.
  void HandleBatch(const HttpRequest& req, const Principal* who, Respond& respond,
                   std::size_t* reserved);
  // GET /ui and its files: static, open without a token (the data is behind /v1/events).
  void HandleUi(const HttpRequest& req, std::string_view path, Respond& respond);
  // GET /healthz (`ready` false) or /readyz.
  void HandleHealth(const HttpRequest& req, bool ready, Respond& respond);
  // GET /metrics: the server's, the store's and extra_metrics.
  void HandleMetrics(const HttpRequest& req, Respond& respond);
  // The long-read (or fence administration) queue was full: 503 busy with Retry-After, counted
  // in the metrics. `what`: what is queued ("long reads").
  void RefuseLongRead(std::string_view what, unsigned version, bool keep_alive, Respond& respond);

  FencedStore* store_;
  Metrics* metrics_;
  WorkQueue* long_reads_;
  const Authorizer* auth_;
  std::function<std::string()> extra_metrics_;
  HandlerHooks hooks_;
};

}  // namespace fencekit::httpapi
