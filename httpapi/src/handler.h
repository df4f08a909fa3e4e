// Handler: the HTTP semantics of fenced (routing, validation, status codes), separate from
// sockets so it can be tested and read on its own.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/url/url_view.hpp>
#include <functional>
#include <string_view>

#include "auth.h"
#include "metrics.h"
#include "wire.h"

namespace fencekit {

class FencedStore;
class WorkQueue;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Thread safety: safe for concurrent use; the store and metrics must outlive it.
class Handler {
 public:
  using Respond = std::function<void(HttpResponse)>;

  // `long_reads` runs the reads too slow for an I/O thread (the history) and fence
  // administration. `auth` null: no authentication, every route open but fence administration.
  // `extra_metrics`, when set, is appended to GET /metrics (ServerOptions::extra_metrics).
  Handler(FencedStore* store, Metrics* metrics, WorkQueue* long_reads,
          const Authorizer* auth = nullptr, std::function<std::string()> extra_metrics = {})
      : store_(store),
        metrics_(metrics),
        long_reads_(long_reads),
        auth_(auth),
        extra_metrics_(std::move(extra_metrics)) {}

  // Answers `req` through `respond`, exactly once: synchronously for short reads and refusals,
  // from the store's writer thread for writes, from a long-read worker for the history (503
  // "busy" when its queue is full).
  void Handle(HttpRequest&& req, Respond respond);

  // The JSON error response for `e` (wire.h): its HTTP status, {"error", "message"}.
  static HttpResponse ErrorResponse(wire::Error e, std::string_view message, unsigned version,
                                    bool keep_alive);

 private:
  // `principal`: the authenticated client's name, empty without --auth.
  void HandleObject(HttpRequest&& req, std::string key, Respond& respond,
                    std::string principal = {});
  void HandleFence(const HttpRequest& req, std::string lock, Respond& respond);
  void Unauthorized(const HttpRequest& req, const Authorizer::Verdict& verdict, Respond& respond);
  void HandleSetFence(const HttpRequest& req, std::string lock, const Principal* who,
                      Respond& respond);
  void HandleHistory(const HttpRequest& req, const boost::urls::url_view& url, Respond& respond);
  // GET /v1/objects?prefix=&after=&limit=: on the long-read queue.
  void HandleList(const HttpRequest& req, const boost::urls::url_view& url, const Principal* who,
                  Respond& respond);
  // POST /v1/batch: several writes under one grant, all or none.
  void HandleBatch(const HttpRequest& req, const Principal* who, Respond& respond);

  FencedStore* store_;
  Metrics* metrics_;
  std::function<std::string()> extra_metrics_;
  WorkQueue* long_reads_;
  const Authorizer* auth_;
};

}  // namespace fencekit
