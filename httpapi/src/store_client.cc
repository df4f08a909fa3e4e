#include "fencekit/httpapi/store_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>
#include <optional>

#include "fencekit/common/names.h"
#include "wire.h"

namespace fencekit {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

class HttpStoreClient final : public StoreClient {
 public:
  // `tls` null: plain http.
  HttpStoreClient(std::string host, std::string port, StoreClientOptions options,
                  std::unique_ptr<ssl::context> tls)
      : host_(std::move(host)),
        port_(std::move(port)),
        options_(std::move(options)),
        tls_(std::move(tls)) {
    if (!options_.bearer_token.empty()) authorization_ = "Bearer " + options_.bearer_token;
  }

  using StoreClient::Delete;
  using StoreClient::Put;
  Result<WriteResponse> Put(std::string_view lock, FencingToken token, std::string_view key,
                            std::string_view value, std::string_view service) override {
    return Write(http::verb::put, lock, token, key, value, service);
  }
  Result<WriteResponse> Delete(std::string_view lock, FencingToken token, std::string_view key,
                               std::string_view service) override {
    return Write(http::verb::delete_, lock, token, key, {}, service);
  }

  Result<WriteResponse> Write(std::string_view lock, FencingToken token, const ObjectWrite& write,
                              std::string_view service) override {
    return Write(write.is_delete ? http::verb::delete_ : http::verb::put, lock, token, write.key,
                 write.value, service, write.if_version);
  }

  Result<std::vector<WriteResponse>> Batch(std::string_view lock, FencingToken token,
                                           const std::vector<ObjectWrite>& writes,
                                           std::string_view service) override {
    if (Status bad = CheckName("lock name", lock); !bad.ok()) return bad;
    for (const auto& w : writes) {
      if (Status bad = CheckName("key", w.key); !bad.ok()) return bad;
    }
    if (!service.empty()) {
      if (Status bad = CheckServiceId(service); !bad.ok()) return bad;
    }
    auto res = Exchange(http::verb::post, std::string(wire::kBatchPath), {}, {},
                        wire::BatchToJson(lock, token, service, writes), {}, "application/json");
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok) {
      return ErrorFrom(*res, "a batch of " + std::to_string(writes.size()) +
                                 " writes under lock \"" + std::string(lock) + "\" with token " +
                                 token.ToString());
    }
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    auto receipts = wire::BatchReceiptsFromJson(*body, lock, token, writes);
    if (!receipts.ok()) {
      return Status::Unavailable(Where() + " sent a bad answer: " + receipts.status().message());
    }
    return receipts;
  }

  Result<ObjectPage> List(std::string_view prefix, std::string_view after,
                          std::size_t limit) override {
    auto res = Exchange(http::verb::get, wire::ListTarget(prefix, after, limit), {}, {}, {});
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok) return ErrorFrom(*res, "listing keys");
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    auto page = wire::ObjectPageFromJson(*body);
    if (!page.ok()) {
      return Status::Unavailable(Where() + " sent a bad listing: " + page.status().message());
    }
    return page;
  }

  Result<GetResponse> Get(std::string_view key) override {
    auto res = Exchange(http::verb::get, wire::ObjectPath(key), {}, {}, {});
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok)
      return ErrorFrom(*res, "reading \"" + std::string(key) + "\"");
    auto lock = wire::NameFromHeader(res->operator[](wire::kLockHeader));
    if (!lock) return Status::Unavailable("the store sent a bad Fencing-Lock header");
    GetResponse out{res->body(), std::move(*lock), FencingToken::FromInt(1).value(), 0};
    auto token = FencingToken::Parse(res->operator[](wire::kTokenHeader));
    if (!token.ok()) return Status::Unavailable("the store sent a bad Fencing-Token header");
    out.token = *token;
    auto version = wire::ParseCount(res->operator[](wire::kVersionHeader), 1);
    if (!version) return Status::Unavailable("the store sent a bad Object-Version header");
    out.version = *version;
    return out;
  }

  Result<std::optional<FencingToken>> Highest(std::string_view lock) override {
    auto fence = Fence(lock);
    if (!fence.ok()) return fence.status();
    if (!fence->has_value()) return std::optional<FencingToken>();
    return std::optional<FencingToken>((*fence)->highest);
  }

  Result<std::optional<FenceState>> Fence(std::string_view lock) override {
    auto res = Exchange(http::verb::get, wire::FencePath(lock), {}, {}, {});
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok) return ErrorFrom(*res, "reading a fence");
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    const json::object& o = body->as_object();
    auto* highest = o.if_contains("highest");
    if (highest == nullptr || !highest->is_int64()) {
      return Status::Unavailable("the store's fence reply has no \"highest\" number");
    }
    if (highest->as_int64() == 0) return std::optional<FenceState>();
    auto t = FencingToken::FromInt(highest->as_int64());
    if (!t.ok()) return t.status();
    FenceState fence{*t, {}};
    if (auto* service = o.if_contains("service"); service != nullptr) {
      if (!service->is_string() || !CheckServiceId(service->as_string()).ok()) {
        return Status::Unavailable("the store's fence reply has a malformed \"service\"");
      }
      fence.service = std::string(service->as_string());
    }
    return std::optional<FenceState>(std::move(fence));
  }

  Result<Decision> SetFence(std::string_view lock, FencingToken highest,
                            bool unbind_service) override {
    if (Status bad = CheckName("lock name", lock); !bad.ok()) return bad;
    json::object o{{"highest", highest.value()}};
    if (unbind_service) o["unbind_service"] = true;
    auto res = Exchange(http::verb::put, wire::FencePath(lock), {}, {}, json::serialize(o), {},
                        "application/json");
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok) return ErrorFrom(*res, "setting a fence");
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    auto d = wire::DecisionFromJson(*body);
    if (!d.ok())
      return Status::Unavailable(Where() + " sent a bad decision: " + d.status().message());
    return d;
  }

  Result<std::vector<Decision>> History(std::size_t limit) override {
    auto res =
        Exchange(http::verb::get,
                 std::string(wire::kHistoryPath) + "?limit=" + std::to_string(limit), {}, {}, {});
    if (!res.ok()) return res.status();
    if (res->result() != http::status::ok) return ErrorFrom(*res, "reading the history");
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    auto* list = body->as_object().if_contains("decisions");
    if (list == nullptr || !list->is_array()) {
      return Status::Unavailable(Where() + " sent a history without a \"decisions\" list");
    }
    std::vector<Decision> out;
    out.reserve(list->as_array().size());
    for (const auto& item : list->as_array()) {
      auto d = wire::DecisionFromJson(item);
      if (!d.ok())
        return Status::Unavailable(Where() + " sent a bad history: " + d.status().message());
      out.push_back(std::move(*d));
    }
    return out;
  }

 private:
  std::string Where() const {
    return std::string("store ") + (tls_ ? "https://" : "http://") + host_ + ":" + port_;
  }

  Result<WriteResponse> Write(http::verb verb, std::string_view lock, FencingToken token,
                              std::string_view key, std::string_view value,
                              std::string_view service, IfVersion if_version = std::nullopt) {
    // The server's rule, checked here too so that a bad name fails before any I/O.
    if (Status bad = CheckName("key", key); !bad.ok()) return bad;
    if (!lock.empty()) {
      if (Status bad = CheckName("lock name", lock); !bad.ok()) return bad;
    }
    if (!service.empty()) {
      if (Status bad = CheckServiceId(service); !bad.ok()) return bad;
    }
    if (if_version && *if_version < 0) {
      return Status::InvalidArgument("a version precondition is a version >= 1, or kIfAbsent");
    }
    auto res = Exchange(verb, wire::ObjectPath(key), lock, token.ToString(), value, service,
                        "application/octet-stream", if_version);
    if (!res.ok()) return res.status();
    auto code = res->result();
    if (code != http::status::ok && code != http::status::created) {
      return ErrorFrom(*res, std::string(verb == http::verb::put ? "writing" : "deleting") + " \"" +
                                 std::string(key) + "\" with token " + token.ToString());
    }
    auto body = ParseJson(res->body());
    if (!body.ok()) return body.status();
    const auto& o = body->as_object();
    WriteResponse out{std::string(key), lock.empty() ? std::string(key) : std::string(lock), token,
                      0, code == http::status::created};
    if (auto* v = o.if_contains("version"); v != nullptr && v->is_int64()) {
      out.version = v->as_int64();
    }
    return out;
  }

  Result<json::value> ParseJson(const std::string& body) {
    boost::system::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec || !v.is_object()) {
      return Status::Unavailable(Where() + " sent a reply that is not a JSON object");
    }
    return v;
  }

  Status ErrorFrom(const http::response<http::string_body>& res, const std::string& doing) {
    return wire::StatusFromReply(res.result_int(), res.body(), res[wire::kHighestHeader],
                                 Where() + " refused " + doing);
  }

  // Runs the queued async operations until done or the deadline passes.
  void RunFor(std::chrono::milliseconds limit) {
    ioc_.restart();
    ioc_.run_for(limit + std::chrono::milliseconds(100));
  }

  bool Connected() const { return plain_.has_value() || secure_.has_value(); }
  void Disconnect() {
    plain_.reset();
    secure_.reset();
    buffer_.clear();
  }

  Status Connect() {
    Disconnect();
    tcp::resolver resolver(ioc_);
    boost::system::error_code ec;
    auto endpoints = resolver.resolve(host_, port_, ec);
    if (ec) return Status::Unavailable("cannot resolve " + Where() + ": " + ec.message());
    beast::tcp_stream* tcp_stream = nullptr;
    if (tls_) {
      secure_.emplace(ioc_, *tls_);
      if (Status s = CheckPeerName(secure_->native_handle()); !s.ok()) return s;
      tcp_stream = &beast::get_lowest_layer(*secure_);
    } else {
      tcp_stream = &plain_.emplace(ioc_);
    }
    tcp_stream->expires_after(options_.timeout);
    tcp_stream->async_connect(endpoints,
                              [&](boost::system::error_code e, const tcp::endpoint&) { ec = e; });
    RunFor(options_.timeout);
    if (ec) {
      Disconnect();
      return Status::Unavailable("cannot connect to " + Where() + ": " + ec.message() +
                                 "; is fenced running there?");
    }
    tcp_stream->socket().set_option(tcp::no_delay(true), ec);
    if (!tls_) return Status::Ok();
    tcp_stream->expires_after(options_.timeout);
    secure_->async_handshake(ssl::stream_base::client,
                             [&](boost::system::error_code e) { ec = e; });
    RunFor(options_.timeout);
    if (ec) {
      long verify = SSL_get_verify_result(secure_->native_handle());
      Disconnect();
      if (verify != X509_V_OK) {
        return Status::Unavailable("the TLS certificate of " + Where() +
                                   " is not trusted: " + X509_verify_cert_error_string(verify) +
                                   "; give the certificate authority that signed it (ca_file, "
                                   "fencectl --ca-file)");
      }
      return Status::Unavailable("TLS handshake with " + Where() + " failed: " + ec.message() +
                                 "; is it serving https (fenced --tls-cert)?");
    }
    return Status::Ok();
  }

  // Sets SNI and the name the server's certificate must carry: the URL's host name, or its IP
  // address (which SNI must not carry).
  Status CheckPeerName(SSL* ssl) {
    boost::system::error_code ec;
    net::ip::make_address(host_, ec);
    bool ok = ec ? SSL_set_tlsext_host_name(ssl, host_.c_str()) == 1 &&
                       SSL_set1_host(ssl, host_.c_str()) == 1
                 : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host_.c_str()) == 1;
    if (!ok) return Status::InvalidArgument("cannot check TLS certificates for host " + host_);
    return Status::Ok();
  }

  // Writes `req` and reads the reply into `parser`, within the timeouts.
  template <class Stream>
  boost::system::error_code RoundTrip(Stream& stream, const http::request<http::string_body>& req,
                                      http::response_parser<http::string_body>& parser,
                                      bool& got_reply_bytes) {
    boost::system::error_code ec;
    auto& tcp_stream = beast::get_lowest_layer(stream);
    tcp_stream.expires_after(options_.timeout);
    http::async_write(stream, req, [&](boost::system::error_code e, std::size_t) {
      ec = e;
      if (ec) return;
      tcp_stream.expires_after(options_.timeout);
      http::async_read(stream, buffer_, parser, [&](boost::system::error_code e2, std::size_t n) {
        ec = e2;
        got_reply_bytes = n > 0 || parser.got_some();
      });
    });
    RunFor(options_.timeout * 2);
    if (!ec && !parser.is_done()) ec = beast::error::timeout;
    return ec;
  }

  Result<http::response<http::string_body>> Exchange(
      http::verb verb, std::string target, std::string_view lock, std::string_view token,
      std::string_view body, std::string_view service = {},
      std::string_view content_type = "application/octet-stream",
      IfVersion if_version = std::nullopt) {
    http::request<http::string_body> req(verb, target, 11);
    req.set(http::field::host, host_ + ":" + port_);
    if (!authorization_.empty()) req.set(http::field::authorization, authorization_);
    if (!token.empty()) req.set(wire::kTokenHeader, token);
    if (!lock.empty()) req.set(wire::kLockHeader, lock);
    if (!service.empty()) req.set(wire::kServiceHeader, service);
    if (if_version == kIfAbsent) {
      req.set(http::field::if_none_match, "*");
    } else if (if_version) {
      req.set(http::field::if_match, wire::ETag(*if_version));
    }
    if (verb == http::verb::put || verb == http::verb::post) {
      req.body() = std::string(body);
      req.set(http::field::content_type, content_type);
    }
    req.keep_alive(true);
    req.prepare_payload();
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool reused = Connected();
      if (!reused) {
        if (auto s = Connect(); !s.ok()) return s;
      }
      bool got_reply_bytes = false;
      http::response_parser<http::string_body> parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      auto ec = secure_ ? RoundTrip(*secure_, req, parser, got_reply_bytes)
                        : RoundTrip(*plain_, req, parser, got_reply_bytes);
      if (ec) {
        Disconnect();
        // A reused keep-alive connection may have been closed by the server while idle;
        // retry once on a new connection, but only if the server said nothing at all.
        if (reused && !got_reply_bytes && ec != beast::error::timeout) continue;
        return Status::Unavailable("no reply from " + Where() + ": " + ec.message());
      }
      http::response<http::string_body> res = parser.release();
      if (!res.keep_alive()) Disconnect();
      return res;
    }
    return Status::Unavailable("no reply from " + Where());
  }

  std::string host_, port_;
  StoreClientOptions options_;
  std::string authorization_;          // the Authorization header, empty for none
  std::unique_ptr<ssl::context> tls_;  // null for http://
  net::io_context ioc_;
  // The open connection, if any: one of the two.
  std::optional<beast::tcp_stream> plain_;
  std::optional<TlsStream> secure_;
  beast::flat_buffer buffer_;
};

}  // namespace

Result<std::unique_ptr<StoreClient>> StoreClient::Open(std::string_view base_url,
                                                       StoreClientOptions options) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("store URL \"" + std::string(base_url) +
                                   "\" is invalid: " + std::string(why) +
                                   "; use e.g. http://127.0.0.1:8080 or https://store:8443");
  };
  auto url = boost::urls::parse_uri(base_url);
  if (!url) return bad("it is not a URL");
  const bool https = url->scheme() == "https";
  if (url->scheme() != "http" && !https) return bad("only http:// and https:// are supported");
  if (url->host().empty()) return bad("it names no host");
  if (!url->path().empty() && url->path() != "/") return bad("it must not have a path");
  if (!options.bearer_token.empty() && !wire::IsBearerToken(options.bearer_token)) {
    return Status::InvalidArgument(
        "the bearer token has characters a token cannot have (allowed: A-Z a-z 0-9 - . _ ~ + / "
        "and trailing '='); check the token file for stray characters");
  }
  std::unique_ptr<ssl::context> tls;
  if (https) {
    tls = std::make_unique<ssl::context>(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
    tls->set_verify_mode(ssl::verify_peer);
    boost::system::error_code ec;
    if (options.ca_file.empty()) {
      tls->set_default_verify_paths(ec);
    } else {
      tls->load_verify_file(options.ca_file, ec);
    }
    if (ec) {
      return Status::InvalidArgument(
          options.ca_file.empty()
              ? "cannot load the system's certificate authorities: " + ec.message() +
                    "; give a CA file (ca_file, fencectl --ca-file)"
              : "cannot load the CA file \"" + options.ca_file + "\": " + ec.message() +
                    "; give a readable PEM file of the certificate authorities to trust");
    }
  }
  std::string port = url->has_port() ? std::string(url->port()) : https ? "443" : "80";
  return std::unique_ptr<StoreClient>(new HttpStoreClient(std::string(url->host_address()), port,
                                                          std::move(options), std::move(tls)));
}

}  // namespace fencekit
