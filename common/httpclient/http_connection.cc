// HttpConnection: connect, the TLS handshake with its one peer check, and request/response
// steps, each run synchronously on the connection's io_context with a deadline.
#include "httpclient/http_connection.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <thread>

#include "fencekit/common/mutex.h"

namespace fencekit::httpclient {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;

Deadline After(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + timeout;
}

tcp::resolver::results_type SystemResolve(const std::string& host, const std::string& port,
                                          error_code& ec) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  return resolver.resolve(host, port, ec);
}

// A lookup on a thread of its own and its outcome, shared with the caller who waits for it
// until its deadline. Thread safety: safe for concurrent use.
struct Lookup {
  Mutex mu;
  CondVar cv;
  bool done FENCEKIT_GUARDED_BY(mu) = false;
  error_code ec FENCEKIT_GUARDED_BY(mu);
  tcp::resolver::results_type results FENCEKIT_GUARDED_BY(mu);
};

}  // namespace

bool TimedOut(const error_code& ec) { return ec == beast::error::timeout; }

std::string ConnectFailure::NotTrusted(std::string_view peer, std::string_view hint) const {
  return "the TLS certificate of " + std::string(peer) + " is not trusted: " + untrusted + "; " +
         std::string(hint);
}

HttpConnection::HttpConnection(std::string host, std::string port,
                               std::shared_ptr<ssl::context> tls, Resolver resolve)
    : host_(std::move(host)),
      port_(std::move(port)),
      tls_(std::move(tls)),
      resolve_(resolve ? std::move(resolve) : Resolver(SystemResolve)) {}

HttpConnection::~HttpConnection() { Close(); }

template <typename F>
void HttpConnection::WithStream(F f) {
  if (secure_) return f(*secure_);
  return f(*plain_);
}

template <typename Start>
error_code HttpConnection::Await(Deadline deadline, Start start) {
  error_code ec;
  bool done = false;
  start([&](error_code e, auto&&...) {
    ec = e;
    done = true;
  });
  if (!Run(done, deadline)) return beast::error::timeout;
  return ec;
}

error_code HttpConnection::Resolve(std::chrono::milliseconds timeout,
                                   tcp::resolver::results_type* out) {
  error_code ec;
  net::ip::make_address(host_, ec);
  if (!ec) {  // an IP address: no lookup, nothing to wait for
    tcp::resolver resolver(ioc_);
    *out = resolver.resolve(host_, port_, ec);
    return ec;
  }
  auto lookup = std::make_shared<Lookup>();
  try {
    std::thread([lookup, resolve = resolve_, host = host_, port = port_] {
      error_code e;
      auto results = resolve(host, port, e);
      MutexLock lock(lookup->mu);
      lookup->ec = e;
      lookup->results = std::move(results);
      lookup->done = true;
      lookup->cv.NotifyAll();
    }).detach();
  } catch (const std::exception&) {  // no thread to be had: look it up here, unbounded
    *out = resolve_(host_, port_, ec);
    return ec;
  }
  const Deadline deadline = After(timeout);
  MutexLock lock(lookup->mu);
  while (!lookup->done) {
    if (!lookup->cv.WaitUntil(lookup->mu, deadline)) break;
  }
  if (!lookup->done) return beast::error::timeout;
  *out = lookup->results;
  return lookup->ec;
}

std::optional<ConnectFailure> HttpConnection::Connect(std::chrono::milliseconds timeout) {
  using Step = ConnectFailure::Step;
  Close();
  tcp::resolver::results_type endpoints;
  error_code ec = Resolve(timeout, &endpoints);
  if (ec) return ConnectFailure{Step::kResolve, ec, {}};
  tcp::socket* socket;
  if (tls_) {
    secure_.emplace(ioc_, *tls_);
    if (!NamePeer()) {
      Close();
      return ConnectFailure{Step::kPeerName, {}, {}};
    }
    socket = &secure_->next_layer();
  } else {
    socket = &plain_.emplace(ioc_);
  }
  ec = Await(After(timeout), [&](auto done) { net::async_connect(*socket, endpoints, done); });
  if (ec) {
    Close();
    return ConnectFailure{Step::kConnect, ec, {}};
  }
  socket->set_option(tcp::no_delay(true), ec);
  if (!secure_) return std::nullopt;
  ec = Await(After(timeout),
             [&](auto done) { secure_->async_handshake(ssl::stream_base::client, done); });
  if (!ec) return std::nullopt;
  if (TimedOut(ec)) return ConnectFailure{Step::kHandshake, ec, {}};  // already closed
  long verify = SSL_get_verify_result(secure_->native_handle());
  Close();
  return ConnectFailure{Step::kHandshake, ec,
                        verify != X509_V_OK ? X509_verify_cert_error_string(verify) : ""};
}

bool HttpConnection::NamePeer() {
  SSL* ssl = secure_->native_handle();
  // SNI carries a DNS name only, never an IP address.
  error_code not_ip;
  net::ip::make_address(host_, not_ip);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  return not_ip ? X509_VERIFY_PARAM_set1_host(param, host_.c_str(), 0) == 1 &&
                      SSL_set_tlsext_host_name(ssl, host_.c_str()) == 1
                : X509_VERIFY_PARAM_set1_ip_asc(param, host_.c_str()) == 1;
}

error_code HttpConnection::Write(const Request& req, Deadline deadline) {
  if (!is_open()) return net::error::not_connected;
  error_code ec = Await(deadline, [&](auto done) {
    WithStream([&](auto& stream) { http::async_write(stream, req, done); });
  });
  if (ec) Close();
  return ec;
}

error_code HttpConnection::Read(Parser& parser, Deadline deadline, bool* got_bytes) {
  if (!is_open()) return net::error::not_connected;
  std::size_t bytes = 0;
  error_code ec = Await(deadline, [&](auto done) {
    WithStream([&](auto& stream) {
      http::async_read(stream, buffer_, parser, [&bytes, done](error_code e, std::size_t n) {
        bytes = n;
        done(e);
      });
    });
  });
  if (got_bytes != nullptr) *got_bytes = bytes > 0 || parser.got_some();
  if (ec || !parser.get().keep_alive()) Close();
  return ec;
}

error_code HttpConnection::ReadStreamHeader(Deadline deadline) {
  if (!is_open()) return net::error::not_connected;
  stream_.emplace();
  stream_->body_limit(boost::none);
  error_code ec = Await(deadline, [&](auto done) {
    WithStream([&](auto& stream) { http::async_read_header(stream, buffer_, *stream_, done); });
  });
  if (ec) Close();
  return ec;
}

error_code HttpConnection::ReadMore(Deadline until, bool* arrived) {
  *arrived = false;
  if (!is_open() || !stream_) return net::error::not_connected;
  if (!read_pending_) {
    read_pending_ = true;
    WithStream([this](auto& stream) {
      http::async_read_some(stream, buffer_, *stream_, [this](error_code e, std::size_t) {
        read_pending_ = false;
        read_ec_ = e;
      });
    });
  }
  auto now = std::chrono::steady_clock::now();
  if (now >= until) return {};
  ioc_.restart();
  ioc_.run_for(until - now);
  if (read_pending_) return {};
  error_code ec = read_ec_;
  if (ec) {
    Close();
    return ec;
  }
  *arrived = true;
  return {};
}

bool HttpConnection::Run(const bool& done, Deadline deadline) {
  ioc_.restart();
  while (!done && std::chrono::steady_clock::now() < deadline) {
    if (ioc_.run_one_until(deadline) == 0 && ioc_.stopped()) break;
  }
  if (done) return true;
  Close();
  return false;
}

void HttpConnection::Close() {
  tcp::socket* socket = secure_ ? &secure_->next_layer() : plain_ ? &*plain_ : nullptr;
  if (socket != nullptr) {
    error_code ec;
    socket->shutdown(tcp::socket::shutdown_both, ec);
    socket->close(ec);
    ioc_.restart();
    ioc_.run();  // completes cancelled handlers now, while what they refer to is alive
    plain_.reset();
    secure_.reset();
  }
  stream_.reset();
  read_pending_ = false;
  read_ec_ = {};
  buffer_.clear();
}

}  // namespace fencekit::httpclient
