#include "session.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "framing.h"

namespace fencekit {

void SessionRegistry::Add(Session* s) {
  std::lock_guard lock(mu_);
  sessions_.insert(s);
  metrics_->ConnectionOpened();
}

void SessionRegistry::Remove(Session* s) {
  std::lock_guard lock(mu_);
  if (sessions_.erase(s) != 0) metrics_->ConnectionClosed();
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::vector<std::shared_ptr<Session>> SessionRegistry::Collect(
    const std::function<bool(const Session&)>& pick) const {
  std::vector<std::shared_ptr<Session>> out;
  std::lock_guard lock(mu_);
  for (Session* raw : sessions_) {
    if (!pick(*raw)) continue;
    // A session whose destructor is waiting for mu_ yields null here.
    if (auto s = raw->weak_from_this().lock()) out.push_back(std::move(s));
  }
  return out;
}

Session::Session(tcp::socket socket, SessionHost host) : stream_(std::move(socket)), host_(host) {
  host_.registry->Add(this);
}

Session::~Session() { host_.registry->Remove(this); }

void Session::ReadHeader() {
  if (stopping_ || host_.stopping->load()) {
    stopping_ = true;
    if (buffer_.size() == 0) return Close();
  }
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(host_.options->max_header_bytes));
  parser_->body_limit(host_.options->max_body_bytes);
  idle_ = buffer_.size() == 0;
  stream_.expires_after(host_.options->read_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  idle_ = false;
  started_ = std::chrono::steady_clock::now();
  if (ec == http::error::body_limit) {  // the declared Content-Length is over the limit
    return RefuseBodyTooLarge("larger than");
  }
  if (ec == http::error::header_limit) {
    return RefuseAndClose(wire::Error::kHeadersTooLarge, RefusalReason::kHeadersTooLarge,
                          "the request headers are larger than the server's limit of " +
                              std::to_string(host_.options->max_header_bytes) +
                              " bytes; send fewer or shorter headers");
  }
  if (ec) {
    if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
        ec != net::error::operation_aborted && ec != net::error::connection_reset &&
        ec != net::error::eof) {
      // A malformed request line or header: say so, then close.
      return RefuseAndClose(wire::Error::kBadRequest, RefusalReason::kMalformed,
                            "the request could not be parsed as HTTP/1.1 (" + ec.message() + ")");
    }
    return Close();
  }
  auto& req = parser_->get();
  if (auto bad = CheckFraming(req.base())) {
    return RefuseAndClose(bad->error, RefusalReason::kBadFraming, std::move(bad->message));
  }
  header_fields_.clear();
  if (parser_->chunked()) {
    for (const auto& f : req) header_fields_.push_back(&f);
  }
  auto length = parser_->content_length();
  if (length && *length > host_.options->max_body_bytes) {
    return RefuseBodyTooLarge(std::to_string(*length) + " bytes, over");
  }
  if (beast::iequals(req[http::field::expect], "100-continue") && !parser_->is_done()) {
    auto cont =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
    stream_.expires_never();
    WriteStarted();
    return http::async_write(stream_, *cont,
                             [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
                               self->WriteDone();
                               if (ec) return self->Close();
                               self->ReadBody();
                             });
  }
  ReadBody();
}

void Session::ReadBody() {
  stream_.expires_after(host_.options->read_timeout);
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
}

void Session::OnBody(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    return RefuseBodyTooLarge("larger than");
  }
  if (ec) {
    // A body that breaks the chunked grammar is answered; a peer that went away or stalled
    // past the read timeout is not.
    if (ec.category() == http::make_error_code(http::error::bad_chunk).category() &&
        ec != http::error::partial_message && ec != http::error::end_of_stream) {
      return RefuseAndClose(wire::Error::kBadRequest, RefusalReason::kMalformed,
                            "the request body could not be parsed (" + ec.message() + ")");
    }
    return Close();
  }
  if (parser_->chunked()) DropTrailerFields();
  stream_.expires_never();
  host_.handler->Handle(parser_->release(), [self = shared_from_this()](HttpResponse res) {
    // The store answers writes on its writer thread: hop back to this connection's strand.
    net::post(self->stream_.get_executor(),
              [self, res = std::move(res)]() mutable { self->Write(std::move(res)); });
  });
}

void Session::Write(HttpResponse res) {
  if (stopping_ || host_.stopping->load()) res.keep_alive(false);
  auto shared = std::make_shared<HttpResponse>(std::move(res));
  bool keep_alive = shared->keep_alive();
  // A deadline for the whole response, not per send (a client that reads a byte now and then
  // cannot stretch it), kept by the server's write watchdog.
  WriteStarted();
  http::async_write(stream_, *shared,
                    [self = shared_from_this(), shared, keep_alive](
                        beast::error_code ec, std::size_t) { self->OnWrite(keep_alive, ec); });
}

void Session::OnWrite(bool keep_alive, beast::error_code ec) {
  WriteDone();
  host_.metrics->ObserveLatency(std::chrono::steady_clock::now() - started_);
  if (ec || !keep_alive) return Close();
  ReadHeader();
}

void Session::CutOffOverdueWrite(std::chrono::steady_clock::duration limit) {
  net::post(stream_.get_executor(), [self = shared_from_this(), limit] {
    if (!self->WriteOverdue(std::chrono::steady_clock::now(), limit)) return;
    self->host_.metrics->CountWriteTimeout();
    self->Close();  // the pending write fails, and OnWrite ends the session
  });
}

void Session::DropTrailerFields() {
  auto& fields = parser_->get();
  for (auto it = fields.begin(); it != fields.end();) {
    bool from_header =
        std::find(header_fields_.begin(), header_fields_.end(), &*it) != header_fields_.end();
    it = from_header ? std::next(it) : fields.erase(it);
  }
}

void Session::RefuseBodyTooLarge(const std::string& how_large) {
  RefuseAndClose(wire::Error::kBodyTooLarge, RefusalReason::kBodyTooLarge,
                 "the body is " + how_large + " the server's limit of " +
                     std::to_string(host_.options->max_body_bytes) + " bytes (fenced --max-body)");
}

void Session::RefuseAndClose(wire::Error error, RefusalReason reason, std::string message) {
  host_.metrics->CountRefused(reason);
  unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
  stream_.expires_never();  // the read deadline no longer applies; the write watchdog does
  Write(Handler::ErrorResponse(error, message, version, /*keep_alive=*/false));
}

}  // namespace fencekit
