// GatewayConn: one keep-alive HTTP/1.1 connection to an etcd gateway endpoint, over TLS when
// asked (the handshake checks etcd's certificate), every call run synchronously with a deadline.
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "etcd_gateway.h"

namespace fencekit::etcd {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

// A reply, or one message of a watch stream, larger than this is refused (and its connection
// closed) rather than held in memory: etcd's own limit on a request is 1.5 MiB by default.
constexpr std::size_t kMaxReplyBytes = 64 << 20;

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

}  // namespace

struct GatewayConn::Tls {
  Tls(net::io_context& ioc, ssl::context& ctx) : stream(ioc, ctx) {}
  ssl::stream<tcp::socket> stream;
};

template <typename F>
auto GatewayConn::WithStream(F f) {
  if (tls_) return f(tls_->stream);
  return f(*stream_);
}

GatewayConn::GatewayConn(Endpoint endpoint, std::size_t index, std::shared_ptr<ssl::context> tls)
    : endpoint_(std::move(endpoint)), index_(index), tls_context_(std::move(tls)) {}

GatewayConn::~GatewayConn() { Close(); }

Status GatewayConn::Connect(milliseconds timeout) {
  tcp::resolver resolver(ioc_);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(endpoint_.host, std::to_string(endpoint_.port), ec);
  if (ec) return Status::Unavailable("cannot resolve " + endpoint_.Name() + ": " + ec.message());
  tcp::socket* socket;
  if (tls_context_) {
    tls_ = std::make_unique<Tls>(ioc_, *tls_context_);
    socket = &tls_->stream.next_layer();
  } else {
    socket = &stream_.emplace(ioc_);
  }
  closed_ = false;
  bool done = false;
  net::async_connect(*socket, endpoints, [&](boost::system::error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!Run(done, timeout)) {
    return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": no answer within " +
                               FormatMs(timeout));
  }
  if (ec) {
    Close();
    return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": " + ec.message());
  }
  socket->set_option(tcp::no_delay(true), ec);
  return tls_ ? Handshake(timeout) : Status::Ok();
}

Status GatewayConn::Handshake(milliseconds timeout) {
  SSL* ssl = tls_->stream.native_handle();
  // The certificate must name the host as the URI gives it: a DNS name (also sent as SNI) or
  // an IP address.
  boost::system::error_code not_ip;
  net::ip::make_address(endpoint_.host, not_ip);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  bool named = not_ip ? X509_VERIFY_PARAM_set1_host(param, endpoint_.host.c_str(), 0) == 1 &&
                            SSL_set_tlsext_host_name(ssl, endpoint_.host.c_str()) == 1
                      : X509_VERIFY_PARAM_set1_ip_asc(param, endpoint_.host.c_str()) == 1;
  if (!named) {
    Close();
    return Status::InvalidArgument("cannot check etcd's TLS certificate for the host \"" +
                                   endpoint_.host + "\"");
  }
  boost::system::error_code ec;
  bool done = false;
  tls_->stream.async_handshake(ssl::stream_base::client, [&](boost::system::error_code e) {
    ec = e;
    done = true;
  });
  if (!Run(done, timeout)) {
    return Status::Unavailable("TLS handshake with " + endpoint_.Name() + ": no answer within " +
                               FormatMs(timeout));
  }
  if (!ec) return Status::Ok();
  long verify = SSL_get_verify_result(ssl);
  Close();
  if (verify != X509_V_OK) {
    return Status::Unavailable("the TLS certificate of etcd at " + endpoint_.Name() +
                               " is not trusted: " + X509_verify_cert_error_string(verify) +
                               "; give the CA that signed it with cacert=FILE");
  }
  return Status::Unavailable("TLS handshake with " + endpoint_.Name() + " failed: " + ec.message() +
                             "; is etcd serving https there (etcds://)?");
}

std::string GatewayConn::Failure(std::string_view what, const boost::system::error_code& ec) const {
  std::string out = std::string(what) + ": " + ec.message();
  // TLS 1.3 sends a refused client certificate's alert after the handshake: it shows here.
  if (tls_context_ && ec.category() == net::error::get_ssl_category() &&
      ec != ssl::error::stream_truncated) {
    out +=
        " (check the TLS settings: does etcd want a client certificate, cert=FILE&key=FILE, "
        "signed by a CA it trusts?)";
  }
  return out;
}

Result<GatewayConn::Reply> GatewayConn::Post(std::string_view target, const std::string& body,
                                             const std::string& token, milliseconds timeout) {
  Parser parser;
  parser.body_limit(kMaxReplyBytes);
  Status s = Exchange(target, body, token, timeout, [&](auto& stream, auto done) {
    http::async_read(stream, buffer_, parser, done);
  });
  if (!s.ok()) return s;
  Reply out{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  if (!parser.get().keep_alive()) Close();
  return out;
}

Status GatewayConn::OpenStream(std::string_view target, const std::string& body,
                               const std::string& token, milliseconds timeout) {
  stream_parser_.emplace();
  stream_parser_->body_limit(boost::none);
  scanned_ = 0;
  Status s = Exchange(target, body, token, timeout, [&](auto& stream, auto done) {
    http::async_read_header(stream, buffer_, *stream_parser_, done);
  });
  if (!s.ok()) return s;
  if (int status = static_cast<int>(stream_parser_->get().result_int()); status != 200) {
    Close();
    return Status::Unavailable(endpoint_.Name() + " refused a watch: HTTP " +
                               std::to_string(status));
  }
  return Status::Ok();
}

Result<std::optional<std::string>> GatewayConn::NextMessage(milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string& body = stream_parser_->get().body();
    if (auto nl = body.find('\n', scanned_); nl != std::string::npos) {
      std::string line = body.substr(0, nl);
      body.erase(0, nl + 1);
      scanned_ = 0;
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      return std::optional<std::string>(std::move(line));
    }
    scanned_ = body.size();  // a long message is searched once, not once per read
    if (body.size() > kMaxReplyBytes) {
      Close();
      return Status::Unavailable(endpoint_.Name() + " sent a watch message of over " +
                                 std::to_string(kMaxReplyBytes >> 20) +
                                 " MiB without its end; closed the stream");
    }
    if (stream_parser_->is_done()) {
      return Status::Unavailable(endpoint_.Name() + " ended the watch stream");
    }
    if (!read_pending_) {
      read_pending_ = true;
      WithStream([this](auto& stream) {
        http::async_read_some(stream, buffer_, *stream_parser_,
                              [this](boost::system::error_code e, std::size_t) {
                                read_pending_ = false;
                                read_ec_ = e;
                              });
      });
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return std::optional<std::string>();
    ioc_.restart();
    ioc_.run_for(until - now);
    if (read_pending_) return std::optional<std::string>();
    if (read_ec_) {
      std::string why = Failure(endpoint_.Name() + " broke the watch stream", read_ec_);
      Close();
      return Status::Unavailable(why);
    }
  }
}

// Writes the request, then starts `read(stream, handler)`, and runs both to completion or
// `timeout`.
template <typename StartRead>
Status GatewayConn::Exchange(std::string_view target, const std::string& body,
                             const std::string& token, milliseconds timeout, StartRead read) {
  http::request<http::string_body> req(http::verb::post, target, 11);
  req.set(http::field::host, endpoint_.Name());
  req.set(http::field::content_type, "application/json");
  // etcd's gateway hands the Authorization header to etcd as the call's auth token.
  if (!token.empty()) req.set(http::field::authorization, token);
  token_ = token;
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();
  boost::system::error_code ec;
  bool done = false;
  auto finish = [&](boost::system::error_code e, std::size_t) {
    ec = e;
    done = true;
  };
  WithStream([&](auto& stream) {
    http::async_write(stream, req, [&](boost::system::error_code e, std::size_t n) {
      if (e) return finish(e, n);
      read(stream, finish);
    });
  });
  if (!Run(done, timeout)) {
    return Status::Unavailable(endpoint_.Name() + ": no reply within " + FormatMs(timeout));
  }
  if (ec) {
    std::string why = Failure(endpoint_.Name(), ec);
    Close();
    return Status::Unavailable(why);
  }
  return Status::Ok();
}

// Runs queued operations until `done` or `timeout` (no timer objects: the wait itself is
// bounded). False on a timeout, after closing the connection, which completes every pending
// handler now: none is left that refers to the caller's frame.
bool GatewayConn::Run(bool& done, milliseconds timeout) {
  ioc_.restart();
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < until) {
    if (ioc_.run_one_until(until) == 0 && ioc_.stopped()) break;
  }
  if (done) return true;
  Close();
  return false;
}

void GatewayConn::Close() {
  // No TLS close_notify: it would need a round trip, and etcd needs none.
  tcp::socket* socket = tls_ ? &tls_->stream.next_layer() : stream_ ? &*stream_ : nullptr;
  if (socket != nullptr) {
    boost::system::error_code ec;
    socket->shutdown(tcp::socket::shutdown_both, ec);
    socket->close(ec);
    ioc_.restart();
    ioc_.run();  // completes cancelled handlers now, while what they refer to is alive
    stream_.reset();
    tls_.reset();
  }
  stream_parser_.reset();
  read_pending_ = false;
  buffer_.clear();
  closed_ = true;
}

}  // namespace fencekit::etcd
