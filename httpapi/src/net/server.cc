// The fenced server: an acceptor and one Session per connection, on a pool of I/O threads.
// Each connection is served on its own strand (with one I/O thread, the thread is the strand);
// requests on one connection are answered in order (pipelined requests wait in the read buffer
// until the previous response is written).
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
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "fencekit/common/mutex.h"
#include "fencekit/fencedstore/store.h"
#include "handlers/auth.h"
#include "handlers/handler.h"
#include "net/session.h"
#include "net/store_callbacks.h"
#include "net/tls_context.h"
#include "net/work_queue.h"
#include "net/write_watch.h"
#include "observe/events.h"
#include "observe/health.h"
#include "observe/log_sink.h"

namespace fencekit::httpapi {
namespace {

// The address to listen on; "localhost" is 127.0.0.1.
Result<net::ip::address> ListenAddress(const std::string& host) {
  if (host == "localhost") return net::ip::address(net::ip::address_v4::loopback());
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) {
    return Status::InvalidArgument("listen address \"" + host +
                                   "\" is not an IP address; use e.g. 127.0.0.1 or 0.0.0.0");
  }
  return address;
}

// 127.0.0.0/8 and ::1 (also as ::ffff:127.x.y.z).
bool IsLoopback(const net::ip::address& a) {
  if (a.is_v4()) return a.to_v4().is_loopback();
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) {
    return net::ip::make_address_v4(net::ip::v4_mapped, v6).is_loopback();
  }
  return v6.is_loopback();
}

// The number of I/O threads: ServerOptions::threads, or one per core but one (left to the
// store's writer thread).
unsigned IoThreads(const ServerOptions& options) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return options.threads != 0 ? options.threads : std::max(1u, cores - 1);
}

// How long destroying the server waits for the store to answer the writes of its connections.
constexpr std::chrono::seconds kStoreCallbacksBound{300};

class ServerImpl final : public Server {
 public:
  ServerImpl(ServerOptions options, FencedStore* store, std::unique_ptr<Authorizer> auth,
             std::unique_ptr<net::ssl::context> tls)
      : options_(std::move(options)),
        auth_(std::move(auth)),
        tls_(std::move(tls)),
        long_reads_(options_.long_read_threads, options_.max_queued_long_reads),
        fence_admin_(1, kMaxQueuedFenceAdmin),
        answers_(options_.max_response_memory),
        log_(options_.log, &metrics_),
        events_({.max_streams = options_.max_event_streams,
                 .max_streams_per_principal = options_.max_event_streams_per_principal,
                 .max_queued_bytes = options_.max_queued_event_bytes},
                &metrics_),
        write_watch_(&events_, &log_),
        handler_(
            store, &metrics_, &long_reads_, auth_.get(), options_.extra_metrics,
            HandlerHooks{&write_watch_, &health_, &fence_admin_, &answers_, &store_callbacks_}),
        io_threads_(IoThreads(options_)),
        acceptor_(net::make_strand(ioc_)),
        drain_timer_(ioc_),
        health_(store, &write_watch_, ioc_.get_executor(), options_.health_timeout) {}

  ~ServerImpl() override {
    Stop();
    Wait();
    long_reads_.Stop();  // its tasks post to sessions' strands: done before ioc_ goes
    fence_admin_.Stop();
    AwaitStoreCallbacks();
  }

  Status Bind() {
    auto address = ListenAddress(options_.host);
    if (!address.ok()) return address.status();
    tcp::endpoint endpoint(*address, options_.port);
    beast::error_code ec;
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
    WatchTimeouts();
    for (unsigned i = 0; i < io_threads_; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

  std::uint16_t port() const override { return port_; }
  std::size_t max_connections() const override { return max_connections_; }

  void Stop() override {
    if (stop_requested_.exchange(true)) return;
    health_.Draining();
    events_.Close();  // event streams end now rather than at the drain timeout
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      accept_timer_.cancel();
      timeout_watch_timer_.cancel();
      // Real time (not Clock), here and below: Asio's timers and the peers' sockets run on it.
      drain_deadline_ = std::chrono::steady_clock::now() + options_.drain_timeout;
      for (auto& s : registry_.Collect([](const SessionBase&) { return true; })) {
        s->OnServerStop();
      }
      WatchDrain();
    });
  }

  void Wait() override {
    MutexLock lock(wait_mu_);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  // The file descriptors kept back from connections: the database, its WAL and shared-memory
  // files for the writer and each reader, and refused connections being closed.
  static constexpr std::size_t kReservedFds = 128;
  // Fence administrations waiting for their own thread: an admin's few requests, never behind
  // long reads.
  static constexpr std::size_t kMaxQueuedFenceAdmin = 16;

  static std::size_t EffectiveMaxConnections(std::size_t wanted) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return wanted;
    auto fds = static_cast<std::size_t>(lim.rlim_cur);
    std::size_t reserve = std::min(kReservedFds, fds / 2);
    return std::max<std::size_t>(1, std::min(wanted, fds - reserve));
  }

  void Accept() {
    acceptor_.async_accept(SessionExecutor(), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec) return OnAcceptError(ec);
      accept_backoff_ = std::chrono::milliseconds(0);
      if (registry_.size() >= max_connections_) {
        RefuseConnection(std::move(socket));
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        SessionHost host{&options_,
                         &handler_,
                         &metrics_,
                         &stop_requested_,
                         &registry_,
                         &events_,
                         options_.access_log ? &log_ : nullptr,
                         &answers_,
                         &outbox_};
        if (tls_) {
          std::make_shared<TlsSession>(host, std::move(socket), *tls_)->Start();
        } else {
          std::make_shared<PlainSession>(host, std::move(socket))->Start();
        }
      }
      Accept();
    });
  }

  // A new connection's executor: its own strand, or with one I/O thread that thread, which
  // runs one handler at a time already (a strand there only cost a lock and a hop per handler).
  net::any_io_executor SessionExecutor() {
    if (io_threads_ == 1) return ioc_.get_executor();
    return net::make_strand(ioc_);
  }

  // Typically out of file descriptors: wait (10 ms doubling to 1 s) instead of spinning, keep
  // serving the connections already open, and log at most once per 10 s.
  void OnAcceptError(beast::error_code ec) {
    accept_backoff_ = std::clamp(accept_backoff_ * 2, std::chrono::milliseconds(10),
                                 std::chrono::milliseconds(1000));
    ++accept_errors_unlogged_;
    auto now = std::chrono::steady_clock::now();
    if (now - accept_error_logged_ >= std::chrono::seconds(10)) {
      log_.Log(LogTime(std::chrono::system_clock::now()) + " fenced: accept failed " +
               std::to_string(accept_errors_unlogged_) + " time(s) since the last report: " +
               ec.message() + "; retrying in " + std::to_string(accept_backoff_.count()) +
               "ms (lower --max-connections or raise ulimit -n)");
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
  // Over TLS there is no handshake to spend on it: the connection is closed at once.
  void RefuseConnection(tcp::socket socket) {
    if (tls_) {
      metrics_.CountConnectionRefused();
      return;  // ~socket closes it
    }
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

  // The read and write watchdog: every quarter of the shorter timeout (10 ms to 1 s), closes
  // the connections whose request has been in reading for longer than --read-timeout, or whose
  // answer in writing for longer than --write-timeout: each is cut between 1x and 1.25x its
  // timeout (or one interval past it, when the other timeout is the shorter).
  void WatchTimeouts() {
    using Duration = std::chrono::steady_clock::duration;
    auto read_limit = std::chrono::duration_cast<Duration>(options_.read_timeout);
    auto limit = std::chrono::duration_cast<Duration>(options_.write_timeout);
    auto interval = std::clamp<Duration>(std::min(read_limit, limit) / 4,
                                         std::chrono::milliseconds(10), std::chrono::seconds(1));
    timeout_watch_timer_.expires_after(interval);
    timeout_watch_timer_.async_wait([this, limit, read_limit](beast::error_code ec) {
      // Stop() cancels the timer, but a tick already due runs anyway: it must not re-arm, or
      // the I/O threads never run out of work and Wait() never returns.
      if (ec || stop_requested_.load()) return;
      auto now = std::chrono::steady_clock::now();
      auto overdue =
          registry_.Collect([&](const SessionBase& s) { return s.WriteOverdue(now, limit); });
      for (auto& s : overdue) s->CutOffOverdueWrite(limit);
      auto slow =
          registry_.Collect([&](const SessionBase& s) { return s.ReadOverdue(now, read_limit); });
      for (auto& s : slow) s->CutOffOverdueRead(read_limit);
      WatchTimeouts();
    });
  }

  // A write's callback answers into this server (its metrics, write watch, sessions and
  // outbox), so none may run once it is gone. The store runs every callback it was given,
  // within its own timeouts (at once for a store closed first); past kStoreCallbacksBound the
  // process ends rather than free memory that a late answer would write to.
  void AwaitStoreCallbacks() {
    const auto start = std::chrono::steady_clock::now();
    if (store_callbacks_.AwaitNone(start + options_.drain_timeout)) return;
    const std::string waiting = "fenced: the store has not answered " +
                                std::to_string(store_callbacks_.pending()) +
                                " write(s) of stopped connections";
    log_.Log(LogTime(std::chrono::system_clock::now()) + " " + waiting +
             "; the server waits for them before it goes");
    if (store_callbacks_.AwaitNone(start + kStoreCallbacksBound)) return;
    std::fprintf(stderr, "%s after %lld s; aborting\n", waiting.c_str(),
                 static_cast<long long>(kStoreCallbacksBound.count()));
    std::abort();
  }

  void WatchDrain() {
    std::size_t live = registry_.size();
    if (live == 0) return;  // nothing left: the threads run out of work and return
    if (std::chrono::steady_clock::now() >= drain_deadline_) {
      log_.Log(LogTime(std::chrono::system_clock::now()) + " fenced: drain timeout; cutting " +
               std::to_string(live) + " connection(s) with requests still in flight");
      ioc_.stop();
      return;
    }
    drain_timer_.expires_after(std::chrono::milliseconds(5));
    drain_timer_.async_wait([this](beast::error_code) { WatchDrain(); });
  }

  ServerOptions options_;
  std::unique_ptr<Authorizer> auth_;        // null without auth_file
  std::unique_ptr<net::ssl::context> tls_;  // null for plain HTTP
  Metrics metrics_;
  WorkQueue long_reads_;
  WorkQueue fence_admin_;
  ResponseBudget answers_;
  StoreCallbacks store_callbacks_;
  // Before ioc_, so that they outlive the sessions that ioc_'s pending handlers still hold.
  LogSink log_;
  EventHub events_;
  WriteWatch write_watch_;
  Handler handler_;
  // Before ioc_, so that it outlives the sessions that ioc_'s pending handlers still hold.
  SessionRegistry registry_{&metrics_};
  const unsigned io_threads_;
  net::io_context ioc_;
  // After ioc_: the sessions it holds close their sockets while ioc_ is still there.
  AnswerOutbox outbox_{ioc_};
  tcp::acceptor acceptor_;
  net::steady_timer drain_timer_;
  // After ioc_: its probe threads post timeouts there, and it is destroyed (joined) first.
  HealthChecker health_;
  net::steady_timer timeout_watch_timer_{ioc_};
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
  Mutex wait_mu_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace
}  // namespace fencekit::httpapi

namespace fencekit {

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, FencedStore* store) {
  if (store == nullptr) return Status::InvalidArgument("Server::Start needs a store");
  auto address = httpapi::ListenAddress(options.host);
  if (!address.ok()) return address.status();
  std::unique_ptr<httpapi::Authorizer> auth;
  if (!options.auth_file.empty()) {
    auto loaded = httpapi::Authorizer::LoadFile(options.auth_file);
    if (!loaded.ok()) return loaded.status();
    auth = std::move(loaded).value();
  } else if (!httpapi::IsLoopback(*address) && !options.insecure_no_auth) {
    return Status::InvalidArgument(
        "refusing to listen on " + options.host +
        " without authentication: anyone who can reach it could read and overwrite every key. "
        "Give --auth FILE (docs/http-api.md), listen on 127.0.0.1, or pass --insecure-no-auth "
        "if only trusted hosts can reach this address");
  }
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
    auto made = httpapi::MakeServerTlsContext(options.tls_cert_file, options.tls_key_file);
    if (!made.ok()) return made.status();
    tls = std::move(made).value();
  }
  auto server = std::make_unique<httpapi::ServerImpl>(std::move(options), store, std::move(auth),
                                                      std::move(tls));
  if (auto s = server->Bind(); !s.ok()) return s;
  server->Run();
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace fencekit
