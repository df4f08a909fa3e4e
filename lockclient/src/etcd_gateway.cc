#include "etcd_gateway.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

namespace fencekit::etcd {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

constexpr std::size_t kMaxTokenBytes = 1024;
constexpr std::size_t kMaxShownBytes = 200;
// A reply, or one message of a watch stream, larger than this is refused (and its connection
// closed) rather than held in memory: etcd's own limit on a request is 1.5 MiB by default.
constexpr std::size_t kMaxReplyBytes = 64 << 20;

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

// Text etcd sent, fit for a message: printable ASCII (anything else becomes '?'), cut short.
std::string Shown(std::string_view text) {
  std::string out(text.substr(0, kMaxShownBytes));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (text.size() > kMaxShownBytes) out += "...";
  return out;
}

// A token that can travel in a header as it is.
bool UsableToken(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  return std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// The gRPC code named in "rpc error: code = NAME desc = TEXT"; 0 when none is.
std::int64_t GrpcCodeOf(std::string_view reason) {
  constexpr std::string_view kCode = "code = ";
  std::size_t at = reason.find(kCode);
  if (at == std::string_view::npos) return 0;
  std::string_view name = reason.substr(at + kCode.size());
  name = name.substr(0, name.find(' '));
  static constexpr std::pair<std::string_view, std::int64_t> kCodes[] = {
      {"InvalidArgument", kGrpcInvalidArgument},
      {"DeadlineExceeded", kGrpcDeadlineExceeded},
      {"NotFound", kGrpcNotFound},
      {"PermissionDenied", kGrpcPermissionDenied},
      {"FailedPrecondition", kGrpcFailedPrecondition},
      {"Unavailable", kGrpcUnavailable},
      {"Unauthenticated", kGrpcUnauthenticated}};
  for (const auto& [n, code] : kCodes) {
    if (n == name) return code;
  }
  return 0;
}

// `errors`: "; "-separated, one per attempt; each distinct one is said once.
// `tls`: whether the connections spoke TLS.
Status Unreachable(const std::string& errors, bool tls) {
  std::vector<std::string> seen;
  std::string said;
  for (std::size_t at = 0; at < errors.size();) {
    std::size_t next = errors.find("; ", at);
    if (next == std::string::npos) next = errors.size();
    std::string one = errors.substr(at, next - at);
    at = next + 2;
    if (one.empty() || std::find(seen.begin(), seen.end(), one) != seen.end()) continue;
    said += (seen.empty() ? "" : "; ") + one;
    seen.push_back(std::move(one));
  }
  // An HTTPS server closes a connection that sends it plain HTTP, without a word.
  std::string https = !tls && said.find("end of stream") != std::string::npos
                          ? " (if it serves HTTPS, use etcds://)"
                          : "";
  return Status::Unavailable("no etcd endpoint answered (" + said +
                             "); check that etcd is running and has a leader" + https);
}

}  // namespace

std::int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (!v->is_string()) return 0;
  std::int64_t out = 0;
  const json::string& s = v->as_string();
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out;
}

const json::object* Object(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_object() ? &v->as_object() : nullptr;
}

std::string String(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// ---------------------------------------------------------------------------------------------
// GatewayConn

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

// ---------------------------------------------------------------------------------------------
// Gateway

Gateway::Gateway(std::vector<Endpoint> endpoints, milliseconds op_timeout, int pool_size,
                 GatewayAccess access, Clock* clock)
    : endpoints_(std::move(endpoints)),
      op_timeout_(op_timeout),
      pool_size_(pool_size),
      access_(std::move(access)),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

Result<json::object> Gateway::Call(std::string_view target, const json::object& body, int* sends) {
  std::string text = json::serialize(body);
  auto token = Token();
  if (!token.ok()) return token.status();
  Refusal refusal;
  auto reply = Send(target, text, *token, sends, &refusal);
  if (reply.ok() || !TokenRefused(refusal)) return reply;
  // The token expired (or etcd restarted, or turned authentication on): etcd did nothing
  // with that attempt. Once more with a new token.
  if (sends != nullptr) --*sends;
  token = Renew(*token);
  if (!token.ok()) return token.status();
  refusal = {};
  return Send(target, text, *token, sends, &refusal);
}

Result<json::object> Gateway::Send(std::string_view target, const std::string& text,
                                   const std::string& token, int* sends, Refusal* refusal) {
  std::string errors;
  int tries = 0;
  // Every endpoint twice; and while members answer "unavailable" (an election after the
  // leader died takes about one election timeout), keep asking for up to op_timeout.
  const int max_tries = 2 * static_cast<int>(endpoints_.size()) + 1;
  const auto give_up = clock_->Now() + op_timeout_;
  for (;;) {
    auto conn = Take(&errors);
    if (!conn) return Unreachable(errors, access_.tls != nullptr);
    if (sends != nullptr) ++*sends;
    auto reply = conn->Post(target, text, token, op_timeout_);
    if (!reply.ok()) {
      errors += "; " + reply.status().message();
      Failed(conn->index());
    } else {
      boost::system::error_code ec;
      json::value v = json::parse(reply->body, ec);
      if (ec || !v.is_object()) {
        std::string where = conn->endpoint().Name();
        if (reply->body.find("CommonName of client") != std::string::npos) {
          // etcd with authentication on refuses certificates with a CN at its gateway.
          return Status::InvalidArgument(
              "etcd at " + where +
              " refuses the client certificate (cert=): it has a "
              "CommonName, which etcd's gateway does not accept once authentication is on; "
              "issue the client certificate without one (e.g. openssl req -subj /O=NAME)");
        }
        Failed(conn->index());
        // Go's HTTPS server answers a plain HTTP request with a text saying so.
        bool https = !access_.tls && reply->body.find("HTTPS server") != std::string::npos;
        errors += "; " + where +
                  (https ? " speaks HTTPS; use etcds://"
                         : " sent a reply that is not a JSON object (HTTP " +
                               std::to_string(reply->status) + ": " + Shown(reply->body) + ")");
      } else if (reply->status == 200) {
        Give(std::move(conn));
        return std::move(v.as_object());
      } else {
        // {"error": "...", "message": "...", "code": 14}
        const json::object& o = v.as_object();
        std::int64_t code = Int(o, "code");
        std::string message = Shown(String(o, "message"));
        if (message.empty()) message = "HTTP " + std::to_string(reply->status);
        std::string where = conn->endpoint().Name();
        if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded || reply->status >= 500) {
          Failed(conn->index());
          errors += "; " + where + ": " + message;
        } else {
          Give(std::move(conn));
          *refusal = {code, std::move(message), std::move(where)};
          return Refused(*refusal);
        }
      }
    }
    ++tries;
    if (tries >= max_tries && clock_->Now() >= give_up) {
      return Unreachable(errors, access_.tls != nullptr);
    }
    if (tries >= static_cast<int>(endpoints_.size())) {
      clock_->SleepFor(milliseconds(std::min(10 * tries, 100)));
    }
  }
}

Status Gateway::Refused(const Refusal& r) const {
  const std::string at = "etcd at " + r.where;
  const std::string user = "user \"" + access_.user + "\"";
  if (RefusedForAuth(r)) {
    if (access_.user.empty()) {
      return Status::Unauthenticated(at + " wants authentication (" + r.message +
                                     "); give a user in the URI: etcd://user:password@host:port");
    }
    return Status::Unauthenticated(at + " did not accept the auth token of " + user + " (" +
                                   r.message + ") even just after authenticating");
  }
  if (r.code == kGrpcPermissionDenied) {
    // With client certificates, etcd's gateway passes a call without a token on as made by
    // the user its own certificate names: no permission, rather than "authenticate first".
    if (access_.user.empty()) {
      return Status::PermissionDenied(at + " refused a client without a user: " + r.message +
                                      "; if etcd has authentication on, give a user in the URI: "
                                      "etcd://user:password@host:port");
    }
    return Status::PermissionDenied(at + " refused " + user + ": " + r.message);
  }
  std::string full = at + " answered: " + r.message;
  if (r.code == kGrpcNotFound) return Status::NotFound(full);
  if (r.code == kGrpcInvalidArgument) return Status::InvalidArgument(full);
  return Status::Unavailable(full);
}

bool Gateway::RefusedForAuth(const Refusal& r) {
  // "invalid auth token" (expired, or etcd restarted); "user name is empty" (no token sent).
  return r.code == kGrpcUnauthenticated ||
         (r.code == kGrpcInvalidArgument &&
          r.message.find("user name is empty") != std::string::npos);
}

bool Gateway::TokenRefused(const Refusal& r) const {
  return !access_.user.empty() && RefusedForAuth(r);
}

Result<std::string> Gateway::Token() {
  if (access_.user.empty()) return std::string();
  {
    std::lock_guard lock(mu_);
    if (authenticated_) return token_;
  }
  return Renew("");
}

Result<std::string> Gateway::Renew(const std::string& refused) {
  std::lock_guard one_at_a_time(auth_mu_);
  {
    std::lock_guard lock(mu_);
    if (authenticated_ && token_ != refused) return token_;
  }
  auto token = Authenticate();
  if (!token.ok()) return token.status();
  std::lock_guard lock(mu_);
  token_ = *token;
  authenticated_ = true;
  return token;
}

Result<std::string> Gateway::Authenticate() {
  json::object body{{"name", access_.user}, {"password", access_.password}};
  Refusal refusal;
  auto reply = Send("/v3/auth/authenticate", json::serialize(body), "", nullptr, &refusal);
  if (reply.ok()) {
    std::string token = String(*reply, "token");
    if (!UsableToken(token)) {
      return Status::Unavailable("etcd sent user \"" + access_.user +
                                 "\" an auth token that cannot be used (empty, over 1024 bytes "
                                 "or not printable ASCII)");
    }
    return token;
  }
  // As etcd's own client does: with authentication off, calls need no token.
  if (refusal.code == kGrpcFailedPrecondition) return std::string();
  if (refusal.code == kGrpcInvalidArgument) {
    return Status::Unauthenticated("etcd at " + refusal.where + " refused user \"" + access_.user +
                                   "\": " + refusal.message +
                                   "; check the user name and password in the lock service URI");
  }
  return reply.status();
}

Result<std::unique_ptr<GatewayConn>> Gateway::Stream(std::string_view target,
                                                     const std::string& body) {
  auto token = Token();
  if (!token.ok()) return token.status();
  std::string errors;
  auto conn = Connect(&errors);
  if (!conn) return Unreachable(errors, access_.tls != nullptr);
  if (Status s = conn->OpenStream(target, body, *token, op_timeout_); !s.ok()) {
    Failed(conn->index());
    return s;
  }
  return conn;
}

Status Gateway::StreamRefused(const GatewayConn& conn, std::string_view reason, bool* retry) {
  *retry = false;
  std::string_view desc = reason;
  if (std::size_t at = reason.find("desc = "); at != std::string_view::npos) {
    desc = reason.substr(at + 7);
  }
  Refusal refusal{GrpcCodeOf(reason), Shown(desc), conn.endpoint().Name()};
  if (TokenRefused(refusal)) {
    auto token = Renew(conn.token());
    if (!token.ok()) return token.status();
    *retry = true;
    return Status::Ok();
  }
  if (refusal.code == 0) {
    return Status::Unavailable("etcd at " + refusal.where + " canceled a watch: " + Shown(reason));
  }
  return Refused(refusal);
}

void Gateway::Failed(std::size_t index) {
  std::lock_guard lock(mu_);
  if (preferred_ == index) preferred_ = (index + 1) % endpoints_.size();
  std::erase_if(idle_, [&](const auto& c) { return c->index() == index; });
}

std::unique_ptr<GatewayConn> Gateway::Take(std::string* errors) {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return Connect(errors);
}

void Gateway::Give(std::unique_ptr<GatewayConn> c) {
  if (c->closed()) return;
  std::lock_guard lock(mu_);
  if (static_cast<int>(idle_.size()) < std::max(pool_size_, 1)) idle_.push_back(std::move(c));
}

std::unique_ptr<GatewayConn> Gateway::Connect(std::string* errors) {
  std::size_t start;
  {
    std::lock_guard lock(mu_);
    start = preferred_;
  }
  for (std::size_t k = 0; k < endpoints_.size(); ++k) {
    std::size_t i = (start + k) % endpoints_.size();
    auto c = std::make_unique<GatewayConn>(endpoints_[i], i, access_.tls);
    Status s = c->Connect(op_timeout_);
    if (s.ok()) {
      std::lock_guard lock(mu_);
      preferred_ = i;
      return c;
    }
    *errors += "; " + s.message();
  }
  return nullptr;
}

}  // namespace fencekit::etcd
