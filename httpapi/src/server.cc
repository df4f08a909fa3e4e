// The fenced server: an acceptor and one Session per connection, on a pool of I/O threads.
// Each connection is served on its own strand; requests on one connection are answered in
// order (pipelined requests wait in the read buffer until the previous response is written).
#include "fencekit/httpapi/server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "framing.h"
#include "handler.h"
#include "work_queue.h"

namespace fencekit {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class ServerImpl;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerImpl* server);
  ~Session();
  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }
  // True when a response has been in writing for longer than `limit` (the client stopped
  // reading). Safe from any thread.
  bool WriteOverdue(std::chrono::steady_clock::time_point now,
                    std::chrono::steady_clock::duration limit) const {
    auto started = write_started_.load(std::memory_order_relaxed);
    return started != 0 && now.time_since_epoch().count() - started > limit.count();
  }
  // Closes the connection if its write is still overdue once on its strand.
  void CutOffOverdueWrite(std::chrono::steady_clock::duration limit);
  // Called on server stop: an idle connection is closed now, a busy one after its response.
  void OnServerStop() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      if (self->idle_) self->Close();
    });
  }

 private:
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Write(HttpResponse res);
  // Marks a response as being written (for the server's write watchdog), or done.
  void WriteStarted() {
    write_started_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                         std::memory_order_relaxed);
  }
  void WriteDone() { write_started_.store(0, std::memory_order_relaxed); }
  void OnWrite(bool keep_alive, beast::error_code ec);
  // Removes the fields a chunked body's trailer added: fenced reads fields from the header
  // section only, so a trailer cannot set a fence that proxies and logs never show.
  void DropTrailerFields();
  // Answers a request whose body was not (fully) read, then closes the connection.
  void RefuseAndClose(wire::Error error, RefusalReason reason, std::string message);
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  ServerImpl* server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::chrono::steady_clock::time_point started_;
  // The header section's fields of a chunked request (Beast keeps same-named fields together,
  // so a trailer field can land between them: they are told apart by identity, not position).
  std::vector<const void*> header_fields_;
  // When the response now being written was started (steady-clock ticks), 0 when none is.
  // A watchdog on the server, not a timer per response: arming and cancelling a timer for every
  // response cost ~4% of the single-connection write rate.
  std::atomic<std::chrono::steady_clock::rep> write_started_{0};
  bool idle_ = false;      // waiting for a new request with nothing buffered
  bool stopping_ = false;  // the server is stopping: close after the current response
};

class ServerImpl final : public Server {
 public:
  ServerImpl(ServerOptions options, FencedStore* store)
      : options_(std::move(options)),
        store_(store),
        long_reads_(options_.long_read_threads, options_.max_queued_long_reads),
        handler_(store, &metrics_, &long_reads_),
        acceptor_(net::make_strand(ioc_)),
        drain_timer_(ioc_) {}

  ~ServerImpl() override {
    Stop();
    Wait();
    long_reads_.Stop();  // its tasks post to sessions' strands: done before ioc_ goes
  }

  Status Bind() {
    beast::error_code ec;
    auto address = net::ip::make_address(options_.host, ec);
    if (ec) {
      return Status::InvalidArgument("listen address \"" + options_.host +
                                     "\" is not an IP address; use e.g. 127.0.0.1 or 0.0.0.0");
    }
    tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) + ": " + ec.message() +
                                 "; pick another --listen address or stop the other process");
    }
    port_ = acceptor_.local_endpoint().port();
    max_connections_ = EffectiveMaxConnections(options_.max_connections);
    metrics_.SetMaxConnections(max_connections_);
    return Status::Ok();
  }

  void Run() {
    Accept();
    WatchWrites();
    // Default: one core is left to the store's writer thread.
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    unsigned n = options_.threads != 0 ? options_.threads : std::max(1u, cores - 1);
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

  std::uint16_t port() const override { return port_; }
  std::size_t max_connections() const override { return max_connections_; }

  void Stop() override {
    if (stop_requested_.exchange(true)) return;
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
      write_watch_timer_.cancel();
      drain_deadline_ = std::chrono::steady_clock::now() + options_.drain_timeout;
      std::vector<std::shared_ptr<Session>> sessions;
      {
        std::lock_guard lock(sessions_mu_);
        // A session whose destructor is waiting for sessions_mu_ yields null here.
        for (Session* raw : sessions_) {
          if (auto s = raw->weak_from_this().lock()) sessions.push_back(std::move(s));
        }
      }
      for (auto& s : sessions) s->OnServerStop();
      WatchDrain();
    });
  }

  void Wait() override {
    std::lock_guard lock(wait_mu_);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  const ServerOptions& options() const { return options_; }
  Handler& handler() { return handler_; }
  Metrics& metrics() { return metrics_; }
  bool stopping() const { return stop_requested_.load(); }

  void Register(Session* s) {
    std::lock_guard lock(sessions_mu_);
    sessions_.insert(s);
    metrics_.ConnectionOpened();
  }
  void Unregister(Session* s) {
    std::lock_guard lock(sessions_mu_);
    if (sessions_.erase(s) != 0) metrics_.ConnectionClosed();
  }

 private:
  // The file descriptors kept back from connections: the database, its WAL and shared-memory
  // files for the writer and each reader, and refused connections being closed.
  static constexpr std::size_t kReservedFds = 128;

  static std::size_t EffectiveMaxConnections(std::size_t wanted) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return wanted;
    auto fds = static_cast<std::size_t>(lim.rlim_cur);
    std::size_t reserve = std::min(kReservedFds, fds / 2);
    return std::max<std::size_t>(1, std::min(wanted, fds - reserve));
  }

  void Accept() {
    acceptor_.async_accept(net::make_strand(ioc_),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == net::error::operation_aborted || !acceptor_.is_open())
                               return;
                             if (ec) return OnAcceptError(ec);
                             accept_backoff_ = std::chrono::milliseconds(0);
                             bool full;
                             {
                               std::lock_guard lock(sessions_mu_);
                               full = sessions_.size() >= max_connections_;
                             }
                             if (full) {
                               RefuseConnection(std::move(socket));
                             } else {
                               socket.set_option(tcp::no_delay(true), ec);
                               auto session = std::make_shared<Session>(std::move(socket), this);
                               Register(session.get());
                               session->Start();
                             }
                             Accept();
                           });
  }

  // Typically out of file descriptors: wait (10 ms doubling to 1 s) instead of spinning, keep
  // serving the connections already open, and log at most once per 10 s.
  void OnAcceptError(beast::error_code ec) {
    accept_backoff_ = std::clamp(accept_backoff_ * 2, std::chrono::milliseconds(10),
                                 std::chrono::milliseconds(1000));
    ++accept_errors_unlogged_;
    auto now = std::chrono::steady_clock::now();
    if (now - accept_error_logged_ >= std::chrono::seconds(10)) {
      std::cerr << "fenced: accept failed " << accept_errors_unlogged_
                << " time(s) since the last report: " << ec.message() << "; retrying in "
                << accept_backoff_.count() << "ms (lower --max-connections or raise ulimit -n)"
                << std::endl;
      accept_error_logged_ = now;
      accept_errors_unlogged_ = 0;
    }
    accept_timer_.expires_after(accept_backoff_);
    accept_timer_.async_wait([this](beast::error_code wait_ec) {
      if (wait_ec != net::error::operation_aborted && acceptor_.is_open()) Accept();
    });
  }

  // Over the limit: a fixed 503, then a lingering close (the client's request is read and
  // dropped for up to 1 s so that the close does not reset the connection before the client has
  // read the answer). Lingering sockets are bounded too; beyond the bound the close is at once.
  void RefuseConnection(tcp::socket socket) {
    static const std::string kBody = wire::ErrorBody(
        wire::Error::kTooManyConnections,
        "the server is at its connection limit (fenced --max-connections); retry later");
    static const std::string kResponse =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
        std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
    metrics_.CountConnectionRefused();
    beast::error_code ec;
    socket.non_blocking(true, ec);
    socket.write_some(net::buffer(kResponse), ec);  // fits in a new socket's send buffer
    socket.shutdown(tcp::socket::shutdown_send, ec);
    if (lingering_.load() >= kReservedFds / 4) return;  // closed at once by ~socket
    ++lingering_;
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    stream->expires_after(std::chrono::seconds(1));
    Drain(std::move(stream), std::make_shared<std::array<char, 1024>>());
  }

  void Drain(std::shared_ptr<beast::tcp_stream> stream,
             std::shared_ptr<std::array<char, 1024>> sink) {
    stream->async_read_some(net::buffer(*sink),
                            [this, stream, sink](beast::error_code ec, std::size_t) {
                              if (!ec) return Drain(stream, sink);
                              stream->close();
                              --lingering_;
                            });
  }

  // The write timeout: every quarter of it (at most 1 s), connections whose response has been
  // in writing for longer are closed. A response is cut between 1x and 1.25x the timeout.
  void WatchWrites() {
    auto limit =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.write_timeout);
    auto interval = std::clamp<std::chrono::steady_clock::duration>(
        limit / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
    write_watch_timer_.expires_after(interval);
    write_watch_timer_.async_wait([this, limit](beast::error_code ec) {
      if (ec) return;
      auto now = std::chrono::steady_clock::now();
      std::vector<std::shared_ptr<Session>> overdue;
      {
        std::lock_guard lock(sessions_mu_);
        for (Session* raw : sessions_) {
          if (!raw->WriteOverdue(now, limit)) continue;
          if (auto s = raw->weak_from_this().lock()) overdue.push_back(std::move(s));
        }
      }
      for (auto& s : overdue) s->CutOffOverdueWrite(limit);
      WatchWrites();
    });
  }

  void WatchDrain() {
    std::size_t live = 0;
    {
      std::lock_guard lock(sessions_mu_);
      live = sessions_.size();
    }
    if (live == 0) return;  // nothing left: the threads run out of work and return
    if (std::chrono::steady_clock::now() >= drain_deadline_) {
      std::cerr << "fenced: drain timeout; cutting " << live
                << " connection(s) with requests still in flight\n";
      ioc_.stop();
      return;
    }
    drain_timer_.expires_after(std::chrono::milliseconds(5));
    drain_timer_.async_wait([this](beast::error_code) { WatchDrain(); });
  }

  ServerOptions options_;
  FencedStore* store_;
  Metrics metrics_;
  WorkQueue long_reads_;
  Handler handler_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer drain_timer_;
  net::steady_timer write_watch_timer_{ioc_};
  // Accept state: touched only on the acceptor's strand.
  net::steady_timer accept_timer_{acceptor_.get_executor()};
  std::chrono::milliseconds accept_backoff_{0};
  std::chrono::steady_clock::time_point accept_error_logged_{};
  std::uint64_t accept_errors_unlogged_ = 0;
  std::atomic<std::size_t> lingering_{0};
  std::size_t max_connections_ = 0;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex wait_mu_;
  std::atomic<bool> stop_requested_{false};
  std::mutex sessions_mu_;
  std::unordered_set<Session*> sessions_;  // GUARDED_BY(sessions_mu_)
};

Session::Session(tcp::socket socket, ServerImpl* server)
    : stream_(std::move(socket)), server_(server) {}

Session::~Session() { server_->Unregister(this); }

void Session::ReadHeader() {
  if (stopping_ || server_->stopping()) {
    stopping_ = true;
    if (buffer_.size() == 0) return Close();
  }
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_->options().max_header_bytes));
  parser_->body_limit(server_->options().max_body_bytes);
  idle_ = buffer_.size() == 0;
  stream_.expires_after(server_->options().read_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  idle_ = false;
  started_ = std::chrono::steady_clock::now();
  if (ec == http::error::body_limit) {  // the declared Content-Length is over the limit
    return RefuseAndClose(wire::Error::kBodyTooLarge, RefusalReason::kBodyTooLarge,
                          "the body is larger than the server's limit of " +
                              std::to_string(server_->options().max_body_bytes) +
                              " bytes (fenced --max-body)");
  }
  if (ec == http::error::header_limit) {
    return RefuseAndClose(wire::Error::kHeadersTooLarge, RefusalReason::kHeadersTooLarge,
                          "the request headers are larger than the server's limit of " +
                              std::to_string(server_->options().max_header_bytes) +
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
  if (length && *length > server_->options().max_body_bytes) {
    return RefuseAndClose(
        wire::Error::kBodyTooLarge, RefusalReason::kBodyTooLarge,
        "the body is " + std::to_string(*length) + " bytes; the server's limit is " +
            std::to_string(server_->options().max_body_bytes) + " bytes (fenced --max-body)");
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
  stream_.expires_after(server_->options().read_timeout);
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnBody(ec); });
}

void Session::OnBody(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    return RefuseAndClose(wire::Error::kBodyTooLarge, RefusalReason::kBodyTooLarge,
                          "the body is larger than the server's limit of " +
                              std::to_string(server_->options().max_body_bytes) +
                              " bytes (fenced --max-body)");
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
  server_->handler().Handle(parser_->release(), [self = shared_from_this()](HttpResponse res) {
    // The store answers writes on its writer thread: hop back to this connection's strand.
    net::post(self->stream_.get_executor(),
              [self, res = std::move(res)]() mutable { self->Write(std::move(res)); });
  });
}

void Session::Write(HttpResponse res) {
  if (stopping_ || server_->stopping()) res.keep_alive(false);
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
  server_->metrics().ObserveLatency(std::chrono::steady_clock::now() - started_);
  if (ec || !keep_alive) return Close();
  ReadHeader();
}

void Session::CutOffOverdueWrite(std::chrono::steady_clock::duration limit) {
  net::post(stream_.get_executor(), [self = shared_from_this(), limit] {
    if (!self->WriteOverdue(std::chrono::steady_clock::now(), limit)) return;
    self->server_->metrics().CountWriteTimeout();
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

void Session::RefuseAndClose(wire::Error error, RefusalReason reason, std::string message) {
  server_->metrics().CountRefused(reason);
  unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
  stream_.expires_never();  // the read deadline no longer applies; the write watchdog does
  Write(Handler::ErrorResponse(error, message, version, /*keep_alive=*/false));
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, FencedStore* store) {
  if (store == nullptr) return Status::InvalidArgument("Server::Start needs a store");
  auto server = std::make_unique<ServerImpl>(std::move(options), store);
  if (auto s = server->Bind(); !s.ok()) return s;
  server->Run();
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace fencekit
