#include "net/session.h"

#include <algorithm>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>

#include "fencekit/common/mutex.h"
#include "net/framing.h"
#include "net/response_head.h"
#include "net/tcp_progress.h"

namespace fencekit::httpapi {

void SessionRegistry::Add(SessionBase* s) {
  MutexLock lock(mu_);
  sessions_.insert(s);
  metrics_->ConnectionOpened();
}

void SessionRegistry::Remove(SessionBase* s) {
  MutexLock lock(mu_);
  if (sessions_.erase(s) != 0) metrics_->ConnectionClosed();
}

std::size_t SessionRegistry::size() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

std::vector<std::shared_ptr<SessionBase>> SessionRegistry::Collect(
    const std::function<bool(const SessionBase&)>& pick) const {
  std::vector<std::shared_ptr<SessionBase>> out;
  MutexLock lock(mu_);
  for (SessionBase* raw : sessions_) {
    if (!pick(*raw)) continue;
    // A session whose destructor is waiting for mu_ yields null here.
    if (auto s = raw->weak_from_this().lock()) out.push_back(std::move(s));
  }
  return out;
}

template <class Stream>
void Session<Stream>::Handshake() {
  if constexpr (kTls) {
    // Counted against the connection limit already (registered); bounded by the read timeout,
    // as a request's read is (the server's read watchdog).
    idle_ = true;
    ReadStarted();
    stream_.async_handshake(net::ssl::stream_base::server, [self = Self()](beast::error_code ec) {
      self->ReadDone();
      // A failed handshake (plain HTTP on the TLS port, no shared version or cipher, a stalled
      // peer) has nobody to answer: close.
      if (ec) return self->Close();
      self->ReadHeader();
    });
  }
}

template <class Stream>
void Session<Stream>::ReadHeader() {
  if (stopping_ || host_.stopping->load()) {
    stopping_ = true;
    if (buffer_.size() == 0) return Close();
  }
  parser_.emplace();
  who_ = nullptr;
  method_.clear();
  target_.clear();
  parser_->header_limit(static_cast<std::uint32_t>(host_.options->max_header_bytes));
  parser_->body_limit(host_.options->max_body_bytes);
  idle_ = buffer_.size() == 0;
  ReadStarted();  // the server's read watchdog closes the connection past --read-timeout
  Parse(/*whole=*/false);
}

template <class Stream>
void Session<Stream>::Parse(bool whole) {
  beast::error_code ec;
  while (!(whole ? parser_->is_done() : parser_->is_header_done())) {
    if (buffer_.size() != 0) {
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec) {
        break;
      }
      if (used != 0) continue;
    }
    const std::size_t room = beast::read_size(buffer_, 65536);
    if (room == 0) {  // the buffer is full of a line (or a trailer) that has not ended
      ec = http::error::buffer_overflow;
      break;
    }
    return stream_.async_read_some(buffer_.prepare(room),
                                   [self = Self(), whole](beast::error_code ec, std::size_t n) {
                                     self->buffer_.commit(n);
                                     if (ec == net::error::eof) {
                                       // As Beast's reads say it: a message cut short, or no
                                       // message at all.
                                       if (self->parser_->got_some()) {
                                         ec = {};
                                         self->parser_->put_eof(ec);
                                       } else {
                                         ec = http::error::end_of_stream;
                                       }
                                     }
                                     if (!ec) return self->Parse(whole);
                                     whole ? self->OnBody(ec) : self->OnHeader(ec);
                                   });
  }
  whole ? OnBody(ec) : OnHeader(ec);
}

template <class Stream>
void Session<Stream>::OnHeader(beast::error_code ec) {
  ReadDone();
  idle_ = false;
  // Real time (not Clock), here and below: Asio's timers and the peer's socket run on it, and
  // latencies are measured in it.
  started_ = std::chrono::steady_clock::now();
  // The request line, once parsed (also when a header field or the declared length is refused).
  if (host_.access_log != nullptr && !parser_->get().target().empty()) {
    method_ = parser_->get().method_string();
    target_ = parser_->get().target();
  }
  if (ec == http::error::body_limit) {  // the declared Content-Length is over the limit
    return RefuseBodyTooLarge("larger than");
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return RefuseAndClose(wire::Error::kHeadersTooLarge,
                          "the request headers are larger than the server's limit of " +
                              std::to_string(host_.options->max_header_bytes) +
                              " bytes; send fewer or shorter headers");
  }
  if (ec) {
    // stream_truncated: a TLS client that closed without close_notify, as most do.
    if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
        ec != net::error::operation_aborted && ec != net::error::connection_reset &&
        ec != net::error::eof && ec != net::ssl::error::stream_truncated) {
      // A malformed request line or header: say so, then close.
      return RefuseAndClose(wire::Error::kBadRequest,
                            "the request could not be parsed as HTTP/1.1 (" + ec.message() + ")");
    }
    return Close();
  }
  auto& req = parser_->get();
  if (auto bad = CheckFraming(req.base())) {
    return RefuseAndClose(bad->error, std::move(bad->message));
  }
  ToOriginForm(req.base());
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
    WriteStarted();
    return http::async_write(stream_, *cont,
                             [self = Self(), cont](beast::error_code ec, std::size_t) {
                               self->WriteDone();
                               if (ec) return self->Close();
                               self->ReadBody();
                             });
  }
  ReadBody();
}

template <class Stream>
void Session<Stream>::ReadBody() {
  ReadStarted();
  Parse(/*whole=*/true);
}

template <class Stream>
void Session<Stream>::OnBody(beast::error_code ec) {
  ReadDone();
  if (ec == http::error::body_limit) {
    return RefuseBodyTooLarge("larger than");
  }
  if (ec == http::error::buffer_overflow) {
    // The parser waits for the end of a line (or of the trailer) that does not fit in the read
    // buffer: without this bound, one connection could make the server hold any amount.
    return RefuseAndClose(wire::Error::kHeadersTooLarge,
                          "a chunk-size line with its extensions, or the trailer section, is "
                          "larger than the server allows (" +
                              std::to_string(buffer_.max_size()) +
                              " bytes, twice fenced --max-header); send chunks without "
                              "extensions and a short trailer, or a Content-Length body");
  }
  if (ec) {
    // A body that breaks the chunked grammar is answered; a peer that went away or stalled
    // past the read timeout is not.
    if (ec.category() == http::make_error_code(http::error::bad_chunk).category() &&
        ec != http::error::partial_message && ec != http::error::end_of_stream) {
      return RefuseAndClose(wire::Error::kBadRequest,
                            "the request body could not be parsed (" + ec.message() + ")");
    }
    return Close();
  }
  if (parser_->chunked()) DropTrailerFields();
  host_.handler->Handle(
      parser_->release(),
      [self = Self()](HttpResponse res) {
        // The store answers writes on its writer thread: back to this connection's strand,
        // beside the other answers of the same commit.
        self->host_.outbox->Hand(self, &Session::Deliver, std::move(res));
      },
      &who_, &reserved_);
}

template <class Stream>
void Session<Stream>::Deliver(std::shared_ptr<SessionBase> session, HttpResponse&& res) {
  auto self = std::static_pointer_cast<Session>(std::move(session));
  // With one I/O thread the strand is that thread, where this runs: written at once.
  auto executor = self->stream_.get_executor();
  net::dispatch(executor, [self = std::move(self), res = std::move(res)]() mutable {
    self->Write(std::move(res));
  });
}

template <class Stream>
void Session<Stream>::Write(HttpResponse res) {
  if (res.result() == http::status::ok && res[http::field::content_type] == kEventStreamType) {
    return StartEvents(res.version());
  }
  if (stopping_ || host_.stopping->load()) res.keep_alive(false);
  ChargeAnswer(res);
  status_ = res.result_int();
  bytes_ = res.body().size();
  bool keep_alive = res.keep_alive();
  // A deadline for the whole response, not per send (a client that reads a byte now and then
  // cannot stretch it), kept by the server's write watchdog.
  WriteStarted();
  if (res.chunked()) {  // fenced sends none; Beast's serializer encodes one
    auto shared = std::make_shared<HttpResponse>(std::move(res));
    return http::async_write(
        stream_, *shared, [self = Self(), shared, keep_alive](beast::error_code ec, std::size_t) {
          self->OnWrite(keep_alive, ec);
        });
  }
  // The head and the body in one gathered write, both held by the session until it ends.
  answer_ = std::move(res);
  WriteResponseHead(answer_.base(), head_);
  std::array<net::const_buffer, 2> bytes{net::buffer(head_), net::buffer(answer_.body())};
  net::async_write(stream_, bytes, [self = Self(), keep_alive](beast::error_code ec, std::size_t) {
    self->OnWrite(keep_alive, ec);
  });
}

template <class Stream>
bool Session<Stream>::ChargeAnswer(HttpResponse& res) {
  const std::size_t size = res.body().size();
  if (const std::size_t reserved = std::exchange(reserved_, 0); reserved != 0) {
    // Reserved before the write was decided: the answer says what was decided.
    const std::size_t keep = size <= ResponseBudget::kUncharged ? 0 : size;
    if (keep <= reserved) {
      host_.answers->Release(reserved - keep);
    } else {
      host_.answers->Charge(keep - reserved);
    }
    charged_ = keep;
    return true;
  }
  if (size <= ResponseBudget::kUncharged) return true;
  if (host_.answers->TryCharge(size)) {
    charged_ = size;
    return true;
  }
  host_.metrics->CountAnswerRefused();
  HttpResponse busy = Handler::ErrorResponse(
      wire::Error::kBusy, AnswerBudgetFull(host_.answers->limit()), res.version(), res.keep_alive());
  busy.set(http::field::retry_after, "1");
  res = std::move(busy);
  return false;
}

template <class Stream>
void Session<Stream>::OnWrite(bool keep_alive, beast::error_code ec) {
  WriteDone();
  answer_ = HttpResponse();  // a large body is not kept while the connection idles
  ReleaseAnswer();
  host_.metrics->ObserveLatency(std::chrono::steady_clock::now() - started_);
  if (host_.access_log != nullptr) LogAccess();
  if (ec || !keep_alive) return Close();
  ReadHeader();
}

template <class Stream>
void Session<Stream>::StartEvents(unsigned version) {
  std::weak_ptr<Session> weak = Self();
  EventHub::Refusal why = EventHub::Refusal::kNone;
  events_ = host_.events->Open(
      who_,
      [weak, executor = stream_.get_executor()] {
        net::post(executor, [weak] {
          // Events arrived while the stream waited: end the wait for the heartbeat.
          if (auto self = weak.lock(); self && self->heartbeat_) self->heartbeat_->cancel();
        });
      },
      &why);
  if (!events_) {
    HttpResponse res = Handler::ErrorResponse(
        wire::Error::kTooManyStreams,
        why == EventHub::Refusal::kTooManyForPrincipal
            ? "principal \"" + who_->name + "\" has as many event streams open as one principal " +
                  "may (fenced --max-event-streams-per-principal " +
                  std::to_string(host_.options->max_event_streams_per_principal) +
                  "); close one of its /ui pages or event readers, or retry later"
            : "the server has as many event streams open as it allows (fenced "
              "--max-event-streams " +
                  std::to_string(host_.options->max_event_streams) +
                  "); close another /ui page or event reader, or retry later",
        version, /*keep_alive=*/false);
    res.set(http::field::retry_after, "5");
    return Write(std::move(res));
  }
  heartbeat_.emplace(stream_.get_executor());
  last_sent_ = peer_progress_ = std::chrono::steady_clock::now();
  status_ = 200;
  bytes_ = 0;
  // No length: the stream ends with the connection. Nothing from the request is echoed here.
  events_out_ = version == 10 ? "HTTP/1.0" : "HTTP/1.1";
  events_out_ +=
      " 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
      ": fenced event stream\n\n";
  WatchPeer();
  PumpEvents();
}

template <class Stream>
void Session<Stream>::PumpEvents() {
  if (!events_) return;
  if (stopping_ || host_.stopping->load()) return EndEvents();
  if (!events_->Take(events_out_)) return EndEvents();
  if (events_out_.empty()) return WaitForEvents();
  WriteEvents();
}

template <class Stream>
void Session<Stream>::WaitForEvents() {
  // Woken by events, else every quarter of the write timeout (at most the heartbeat interval)
  // to see whether the peer still takes what it was sent.
  const auto& o = *host_.options;
  auto tick = std::min<std::chrono::steady_clock::duration>(
      std::max<std::chrono::steady_clock::duration>(o.write_timeout / 4,
                                                    std::chrono::milliseconds(10)),
      o.event_heartbeat);
  heartbeat_->expires_after(tick);
  heartbeat_->async_wait([self = Self()](beast::error_code ec) {
    if (!self->events_) return;
    if (!ec) {  // not cancelled by events
      auto now = std::chrono::steady_clock::now();
      if (self->PeerStalled(now)) {
        self->host_.metrics->CountWriteTimeout();
        return self->EndEvents();
      }
      // A comment line: it keeps proxies from closing an idle stream, and gives a peer that
      // stopped reading (or went away) bytes it does not take, which ends the stream.
      if (now - self->last_sent_ >= self->host_.options->event_heartbeat) {
        self->events_out_ = ": heartbeat\n\n";
      }
    }
    self->PumpEvents();
  });
}

template <class Stream>
bool Session<Stream>::PeerStalled(std::chrono::steady_clock::time_point now) {
  auto state = ReadTcpSendState(Tcp().native_handle());
  if (!state) return false;  // the kernel does not say: the write watchdog alone applies
  if (state->queued == 0 || state->acked != peer_acked_) {
    peer_acked_ = state->acked;
    peer_progress_ = now;
    return false;
  }
  return now - peer_progress_ > host_.options->write_timeout;
}

template <class Stream>
void Session<Stream>::WriteEvents() {
  WriteStarted();  // the write watchdog cuts a peer that stops reading
  net::async_write(stream_, net::buffer(events_out_),
                   [self = Self()](beast::error_code ec, std::size_t n) {
                     self->WriteDone();
                     self->last_sent_ = std::chrono::steady_clock::now();
                     self->bytes_ += n;
                     self->events_out_.clear();
                     if (ec) return self->EndEvents();
                     self->PumpEvents();
                   });
}

template <class Stream>
void Session<Stream>::WatchPeer() {
  // A peer sends nothing on an event stream; a read that ends means it went away.
  stream_.async_read_some(net::buffer(peer_bytes_),
                          [self = Self()](beast::error_code ec, std::size_t) {
                            if (ec) return self->EndEvents();
                            self->WatchPeer();
                          });
}

template <class Stream>
void Session<Stream>::EndEvents() {
  if (!events_) return;
  events_.reset();
  heartbeat_->cancel();
  if (host_.access_log != nullptr) LogAccess();
  Close();
}

template <class Stream>
void Session<Stream>::LogAccess() {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now() - started_)
                    .count();
  beast::error_code ec;
  auto peer = Tcp().remote_endpoint(ec);
  std::string line = LogTime(std::chrono::system_clock::now());
  line += " fenced: access peer=";
  if (ec) {
    line += '-';
  } else if (peer.address().is_v6()) {
    line += "[" + peer.address().to_string() + "]:" + std::to_string(peer.port());
  } else {
    line += peer.address().to_string() + ":" + std::to_string(peer.port());
  }
  line += " method=" + (method_.empty() ? std::string("-") : Quote(method_));
  line += " target=" + (target_.empty() ? std::string("-") : Quote(target_));
  line += " status=" + std::to_string(status_) + " bytes=" + std::to_string(bytes_) +
          " duration_us=" + std::to_string(micros);
  if (who_ != nullptr) line += " principal=" + Quote(who_->name);
  host_.access_log->Log(std::move(line));
}

template <class Stream>
void Session<Stream>::CutOffOverdueWrite(std::chrono::steady_clock::duration limit) {
  net::post(stream_.get_executor(), [self = Self(), limit] {
    if (!self->WriteOverdue(std::chrono::steady_clock::now(), limit)) return;
    self->host_.metrics->CountWriteTimeout();
    self->Close();  // the pending write fails, and OnWrite ends the session
  });
}

template <class Stream>
void Session<Stream>::CutOffOverdueRead(std::chrono::steady_clock::duration limit) {
  net::post(stream_.get_executor(), [self = Self(), limit] {
    if (!self->ReadOverdue(std::chrono::steady_clock::now(), limit)) return;
    self->Close();  // the pending read fails, and OnHeader or OnBody ends the session
  });
}

template <class Stream>
void Session<Stream>::DropTrailerFields() {
  auto& fields = parser_->get();
  for (auto it = fields.begin(); it != fields.end();) {
    bool from_header =
        std::find(header_fields_.begin(), header_fields_.end(), &*it) != header_fields_.end();
    it = from_header ? std::next(it) : fields.erase(it);
  }
}

template <class Stream>
void Session<Stream>::RefuseBodyTooLarge(const std::string& how_large) {
  RefuseAndClose(wire::Error::kBodyTooLarge,
                 "the body is " + how_large + " the server's limit of " +
                     std::to_string(host_.options->max_body_bytes) + " bytes (fenced --max-body)");
}

template <class Stream>
void Session<Stream>::RefuseAndClose(wire::Error error, std::string message) {
  host_.metrics->CountRefused(error);
  unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
  Write(Handler::ErrorResponse(error, message, version, /*keep_alive=*/false));
}

template class Session<tcp::socket>;
template class Session<beast::ssl_stream<tcp::socket>>;

}  // namespace fencekit::httpapi
