// Session: one client connection of fenced, on its own strand: (for HTTPS, the TLS handshake,)
// read a request (with limits), check its framing, hand it to the Handler, write the answer,
// repeat. And the registry of a server's sessions, which its limits and watchdogs read.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "fencekit/common/mutex.h"
#include "fencekit/httpapi/server.h"
#include "handlers/handler.h"
#include "net/answer_outbox.h"
#include "net/response_budget.h"
#include "observe/events.h"
#include "observe/log_sink.h"
#include "observe/metrics.h"
#include "wire.h"

namespace fencekit::httpapi {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class SessionBase;

// The sessions of one server. Thread safety: safe for concurrent use.
class SessionRegistry {
 public:
  explicit SessionRegistry(Metrics* metrics) : metrics_(metrics) {}
  void Add(SessionBase* s);
  void Remove(SessionBase* s);
  std::size_t size() const;
  // The live sessions for which `pick` is true (a session being destroyed is skipped).
  std::vector<std::shared_ptr<SessionBase>> Collect(
      const std::function<bool(const SessionBase&)>& pick) const;

 private:
  Metrics* metrics_;
  mutable Mutex mu_;
  std::unordered_set<SessionBase*> sessions_ FENCEKIT_GUARDED_BY(mu_);
};

// What a session needs of its server, which outlives every session.
struct SessionHost {
  const ServerOptions* options;
  Handler* handler;
  Metrics* metrics;
  const std::atomic<bool>* stopping;  // the server is stopping
  SessionRegistry* registry;
  EventHub* events;         // the feed of GET /v1/events
  LogSink* access_log;      // null without ServerOptions::access_log
  ResponseBudget* answers;  // ServerOptions::max_response_memory
  AnswerOutbox* outbox;     // how answers reach the session (most from the writer thread)
};

// What the server's watchdogs and Stop() see of a session, plain or TLS. Virtual calls happen
// only there, never per request. Thread safety: every method is safe from any thread.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  explicit SessionBase(SessionHost host) : host_(host) { host_.registry->Add(this); }
  virtual ~SessionBase() { host_.registry->Remove(this); }
  // True when a response has been in writing for longer than `limit` (the client stopped
  // reading).
  bool WriteOverdue(std::chrono::steady_clock::time_point now,
                    std::chrono::steady_clock::duration limit) const {
    auto started = write_started_.load(std::memory_order_relaxed);
    return started != 0 && now.time_since_epoch().count() - started > limit.count();
  }
  // Closes the connection if its write is still overdue once on its strand.
  virtual void CutOffOverdueWrite(std::chrono::steady_clock::duration limit) = 0;
  // True when a request (its header, or then its body) has been in reading for longer than
  // `limit`: an idle keep-alive connection, or a client that sends too slowly.
  bool ReadOverdue(std::chrono::steady_clock::time_point now,
                   std::chrono::steady_clock::duration limit) const {
    auto started = read_started_.load(std::memory_order_relaxed);
    return started != 0 && now.time_since_epoch().count() - started > limit.count();
  }
  // Closes the connection if its read is still overdue once on its strand.
  virtual void CutOffOverdueRead(std::chrono::steady_clock::duration limit) = 0;
  // Called on server stop: an idle connection (or an event stream) is closed now, a busy one
  // after its response.
  virtual void OnServerStop() = 0;

 protected:
  // Marks a response as being written (for the server's write watchdog), or done. Real time (not
  // Clock), as the watchdog's timer.
  void WriteStarted() {
    write_started_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                         std::memory_order_relaxed);
  }
  void WriteDone() { write_started_.store(0, std::memory_order_relaxed); }
  // The same for reading a request, under the server's read watchdog.
  void ReadStarted() {
    read_started_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                        std::memory_order_relaxed);
  }
  void ReadDone() { read_started_.store(0, std::memory_order_relaxed); }

  SessionHost host_;

 private:
  // When the response now being written was started (steady-clock ticks), 0 when none is.
  // A watchdog on the server, not a timer per response: arming and cancelling a timer for every
  // response cost ~4% of the single-connection write rate.
  std::atomic<std::chrono::steady_clock::rep> write_started_{0};
  // When the read of the request now being read was started (0 when none is). The same
  // watchdog: a timer armed and cancelled per request (Beast's stream deadline) cost a timer
  // queue insertion, a cancellation and a handler run for every request.
  std::atomic<std::chrono::steady_clock::rep> read_started_{0};
};

// One connection over `Stream`: tcp::socket (plain HTTP) or beast::ssl_stream<tcp::socket>
// (HTTPS, which first runs the TLS handshake within the read timeout). A socket, not
// beast::tcp_stream: the server's watchdogs bound every read and write, and the stream's own
// timeouts cost a timer check and an executor copy in every operation. Both are instantiated in
// session.cc. Thread safety: every method runs on (or posts to) the session's strand.
template <class Stream>
class Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  // `stream_args` construct the stream: the socket, and for TLS the server's ssl::context.
  // The read buffer holds twice --max-header: a header section is refused at --max-header
  // (431), and the rest of the framing (a chunk-size line with its extensions, a trailer
  // section) must fit in the buffer, or the request is refused the same way. A chunk's data
  // and a Content-Length body pass through it without piling up.
  template <class... StreamArgs>
  explicit Session(SessionHost host, StreamArgs&&... stream_args)
      : SessionBase(host),
        stream_(std::forward<StreamArgs>(stream_args)...),
        buffer_(2 * host.options->max_header_bytes) {}
  ~Session() override { ReleaseAnswer(); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = Self()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->ReadHeader();
      }
    });
  }
  void CutOffOverdueWrite(std::chrono::steady_clock::duration limit) override;
  void CutOffOverdueRead(std::chrono::steady_clock::duration limit) override;
  void OnServerStop() override {
    net::post(stream_.get_executor(), [self = Self()] {
      self->stopping_ = true;
      if (self->idle_ || self->events_) self->Close();
    });
  }

 private:
  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  tcp::socket& Tcp() { return beast::get_lowest_layer(stream_); }
  void Handshake();
  void ReadHeader();
  // Parses what the read buffer holds and reads until the request's header (`whole`: the
  // whole request) is parsed, then calls OnHeader (OnBody). No operation runs for what the
  // buffer already holds (a body that came with its header); each read is one socket read,
  // without Beast's composed operations around it.
  void Parse(bool whole);
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Write(HttpResponse res);
  // AnswerOutbox::Deliver: writes `res` on the session's strand.
  static void Deliver(std::shared_ptr<SessionBase> session, HttpResponse&& res);
  void OnWrite(bool keep_alive, beast::error_code ec);
  // An answer over ResponseBudget::kUncharged is charged to the server's budget while it is
  // written; false when it does not fit (then `res` is replaced by 503 busy). An answer the
  // handler reserved for (a decided batch) is charged against its reservation, never refused.
  bool ChargeAnswer(HttpResponse& res);
  void ReleaseAnswer() {
    if (charged_ + reserved_ != 0) host_.answers->Release(charged_ + reserved_);
    charged_ = 0;
    reserved_ = 0;
  }
  // Removes the fields a chunked body's trailer added: fenced reads fields from the header
  // section only, so a trailer cannot set a fence that proxies and logs never show.
  void DropTrailerFields();
  // Answers a request whose body was not (fully) read, then closes the connection.
  void RefuseAndClose(wire::Error error, std::string message);
  // 413 and close: "the body is <how_large> the server's limit of N bytes".
  void RefuseBodyTooLarge(const std::string& how_large);
  // The event stream (GET /v1/events): once started, the connection carries nothing else. Its
  // response has no length and ends when the connection closes: on server stop, when the peer
  // goes away (seen by a read, or by a heartbeat or event that cannot be written within the
  // write timeout), when the peer's TCP has taken nothing of what was sent for the write
  // timeout (it stopped reading and its window is full, or it is unreachable), or at once when
  // --max-event-streams (or, per principal, --max-event-streams-per-principal) are open (503).
  void StartEvents(unsigned version);
  void PumpEvents();
  void WaitForEvents();
  void WriteEvents();
  // True when the peer's TCP has acknowledged nothing for longer than the write timeout while
  // bytes wait for it.
  bool PeerStalled(std::chrono::steady_clock::time_point now);
  void WatchPeer();
  void EndEvents();
  // --access-log: one line for the request just answered (or the stream just ended).
  void LogAccess();
  // Closes the TCP connection. For TLS without a close_notify: a peer that has its whole
  // response (Content-Length) loses nothing, and a close never waits on the peer.
  void Close() {
    beast::error_code ec;
    Tcp().shutdown(tcp::socket::shutdown_both, ec);
    Tcp().close(ec);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::chrono::steady_clock::time_point started_;
  // The header section's fields of a chunked request (Beast keeps same-named fields together,
  // so a trailer field can land between them: they are told apart by identity, not position).
  std::vector<const void*> header_fields_;
  bool idle_ = false;      // waiting for a new request (or the TLS handshake), nothing buffered
  bool stopping_ = false;  // the server is stopping: close after the current response
  // The request being answered: who asks (for the access log and the event filter) and, with
  // --access-log, what it asked and what it got.
  const Principal* who_ = nullptr;
  std::string method_, target_;
  unsigned status_ = 0;
  std::size_t bytes_ = 0;
  // The event stream, once started.
  std::shared_ptr<EventStream> events_;
  std::optional<net::steady_timer> heartbeat_;
  std::string events_out_;                               // being written
  std::array<char, 256> peer_bytes_;                     // what the peer sends meanwhile, dropped
  std::chrono::steady_clock::time_point last_sent_;      // the stream's last write
  std::chrono::steady_clock::time_point peer_progress_;  // when the peer last took bytes
  std::uint64_t peer_acked_ = 0;                         // bytes it had taken then
  // The answer being written (Write to OnWrite): its head's bytes, and the response with its
  // body.
  std::string head_;
  HttpResponse answer_;
  // Bytes of the answer being written that are charged to host_.answers (0: none).
  std::size_t charged_ = 0;
  // Bytes of host_.answers the handler reserved for the answer to come (Handler::Handle).
  std::size_t reserved_ = 0;
};

using PlainSession = Session<tcp::socket>;
using TlsSession = Session<beast::ssl_stream<tcp::socket>>;
extern template class Session<tcp::socket>;
extern template class Session<beast::ssl_stream<tcp::socket>>;

}  // namespace fencekit::httpapi
