// GatewayConn: one keep-alive HTTP/1.1 connection to an etcd gateway endpoint, over TLS when
// asked (the handshake checks etcd's certificate), every call run synchronously with a deadline
// through httpclient::HttpConnection. Here: etcd's requests, its wording of failures, and the
// watch stream cut into messages.
#include <boost/asio/ssl/error.hpp>

#include "etcd/gateway.h"
#include "httpclient/http_connection.h"

namespace fencekit::lockclient::etcd {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace ssl = net::ssl;
using httpclient::ConnectFailure;
using std::chrono::milliseconds;

// A reply, or one message of a watch stream, larger than this is refused (and its connection
// closed) rather than held in memory: etcd's own limit on a request is 1.5 MiB by default.
constexpr std::size_t kMaxReplyBytes = 64 << 20;

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

// `what` failed with `ec`: the message, with a hint at the TLS settings for a TLS error.
std::string Failure(bool tls, std::string_view what, const boost::system::error_code& ec) {
  std::string out = std::string(what) + ": " + ec.message();
  // TLS 1.3 sends a refused client certificate's alert after the handshake: it shows here.
  if (tls && ec.category() == net::error::get_ssl_category() &&
      ec != ssl::error::stream_truncated) {
    out +=
        " (check the TLS settings: does etcd want a client certificate, cert=FILE&key=FILE, "
        "signed by a CA it trusts?)";
  }
  return out;
}

}  // namespace

GatewayConn::GatewayConn(Endpoint endpoint, std::size_t index, std::shared_ptr<ssl::context> tls)
    : endpoint_(std::move(endpoint)),
      index_(index),
      conn_(std::make_unique<httpclient::HttpConnection>(
          endpoint_.host, std::to_string(endpoint_.port), std::move(tls))) {}

GatewayConn::~GatewayConn() = default;

bool GatewayConn::closed() const { return !conn_->is_open(); }

Status GatewayConn::Connect(milliseconds timeout) {
  std::optional<ConnectFailure> failed = conn_->Connect(timeout);
  if (!failed) return Status::Ok();
  const std::string name = endpoint_.Name();
  const auto& ec = failed->ec;
  switch (failed->step) {
    case ConnectFailure::Step::kResolve:
      return Status::Unavailable(
          "cannot resolve " + name + ": " +
          (httpclient::TimedOut(ec) ? "no answer from the name service within " + FormatMs(timeout)
                                    : ec.message()));
    case ConnectFailure::Step::kPeerName:
      return Status::InvalidArgument("cannot check etcd's TLS certificate for the host \"" +
                                     endpoint_.host + "\"");
    case ConnectFailure::Step::kConnect:
      return Status::Unavailable(
          "cannot connect to " + name + ": " +
          (httpclient::TimedOut(ec) ? "no answer within " + FormatMs(timeout) : ec.message()));
    case ConnectFailure::Step::kHandshake:
      break;
  }
  if (httpclient::TimedOut(ec)) {
    return Status::Unavailable("TLS handshake with " + name + ": no answer within " +
                               FormatMs(timeout));
  }
  if (!failed->untrusted.empty()) {
    return Status::Unavailable(
        failed->NotTrusted("etcd at " + name, "give the CA that signed it with cacert=FILE"));
  }
  return Status::Unavailable("TLS handshake with " + name + " failed: " + ec.message() +
                             "; is etcd serving https there (etcds://)?");
}

Result<GatewayConn::Reply> GatewayConn::Post(std::string_view target, const std::string& body,
                                             const std::string& token, milliseconds timeout) {
  Reply out;
  if (Status s = Exchange(target, body, token, timeout, &out); !s.ok()) return s;
  return out;
}

Status GatewayConn::OpenStream(std::string_view target, const std::string& body,
                               const std::string& token, milliseconds timeout) {
  scanned_ = 0;
  if (Status s = Exchange(target, body, token, timeout, nullptr); !s.ok()) return s;
  if (int status = static_cast<int>(conn_->stream().get().result_int()); status != 200) {
    conn_->Close();
    return Status::Unavailable(endpoint_.Name() + " refused a watch: HTTP " +
                               std::to_string(status));
  }
  return Status::Ok();
}

Result<std::optional<std::string>> GatewayConn::NextMessage(milliseconds wait) {
  // Real time (not Clock): the socket's wait, which the operating system measures.
  auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string& body = conn_->stream().get().body();
    if (auto nl = body.find('\n', scanned_); nl != std::string::npos) {
      std::string line = body.substr(0, nl);
      body.erase(0, nl + 1);
      scanned_ = 0;
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      return std::optional<std::string>(std::move(line));
    }
    scanned_ = body.size();  // a long message is searched once, not once per read
    if (body.size() > kMaxReplyBytes) {
      conn_->Close();
      return Status::Unavailable(endpoint_.Name() + " sent a watch message of over " +
                                 std::to_string(kMaxReplyBytes >> 20) +
                                 " MiB without its end; closed the stream");
    }
    if (conn_->stream().is_done()) {
      return Status::Unavailable(endpoint_.Name() + " ended the watch stream");
    }
    bool arrived = false;
    if (auto ec = conn_->ReadMore(until, &arrived); ec) {
      return Status::Unavailable(
          Failure(conn_->tls(), endpoint_.Name() + " broke the watch stream", ec));
    }
    if (!arrived) return std::optional<std::string>();
  }
}

Status GatewayConn::Exchange(std::string_view target, const std::string& body,
                             const std::string& token, milliseconds timeout, Reply* reply) {
  httpclient::Request req(http::verb::post, target, 11);
  req.set(http::field::host, endpoint_.Name());
  req.set(http::field::content_type, "application/json");
  // etcd's gateway hands the Authorization header to etcd as the call's auth token.
  if (!token.empty()) req.set(http::field::authorization, token);
  token_ = token;
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();
  // The write and the read share one deadline, in real time (not Clock): the socket's.
  const httpclient::Deadline deadline = std::chrono::steady_clock::now() + timeout;
  boost::system::error_code ec = conn_->Write(req, deadline);
  httpclient::Parser parser;
  parser.body_limit(kMaxReplyBytes);
  if (!ec) {
    ec = reply != nullptr ? conn_->Read(parser, deadline) : conn_->ReadStreamHeader(deadline);
  }
  if (httpclient::TimedOut(ec)) {
    return Status::Unavailable(endpoint_.Name() + ": no reply within " + FormatMs(timeout));
  }
  if (ec) return Status::Unavailable(Failure(conn_->tls(), endpoint_.Name(), ec));
  if (reply != nullptr) {
    *reply = {static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  }
  return Status::Ok();
}

}  // namespace fencekit::lockclient::etcd
