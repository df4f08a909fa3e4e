#include "fencekit/httpapi/store_client.h"

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>
#include <chrono>
#include <limits>
#include <optional>

#include "fencekit/common/names.h"
#include "httpclient/http_connection.h"
#include "wire.h"

namespace fencekit {
namespace {

namespace http = boost::beast::http;
namespace json = boost::json;
namespace ssl = boost::asio::ssl;
using httpclient::ConnectFailure;

// StoreClient over one keep-alive HTTP(S) connection (httpclient::HttpConnection). Thread
// safety: not thread-safe, as StoreClient says.
class HttpStoreClient final : public StoreClient {
 public:
  // `tls` null: plain http.
  HttpStoreClient(std::string host, std::string port, StoreClientOptions options,
                  std::shared_ptr<ssl::context> tls)
      : host_(host), port_(port), options_(std::move(options)), conn_(host, port, std::move(tls)) {
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
    return std::string("store ") + (conn_.tls() ? "https://" : "http://") + host_ + ":" + port_;
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

  Status Connect() {
    std::optional<ConnectFailure> failed = conn_.Connect(options_.timeout);
    if (!failed) return Status::Ok();
    const std::string why = failed->ec.message();
    switch (failed->step) {
      case ConnectFailure::Step::kResolve:
        return Status::Unavailable("cannot resolve " + Where() + ": " +
                                   (httpclient::TimedOut(failed->ec)
                                        ? "no answer from the name service within " +
                                              std::to_string(options_.timeout.count()) + "ms"
                                        : why));
      case ConnectFailure::Step::kPeerName:
        return Status::InvalidArgument("cannot check TLS certificates for host " + host_);
      case ConnectFailure::Step::kConnect:
        return Status::Unavailable("cannot connect to " + Where() + ": " + why +
                                   "; is fenced running there?");
      case ConnectFailure::Step::kHandshake:
        break;
    }
    if (!failed->untrusted.empty()) {
      return Status::Unavailable(failed->NotTrusted(
          Where(), "give the certificate authority that signed it (ca_file, fencectl --ca-file)"));
    }
    return Status::Unavailable("TLS handshake with " + Where() + " failed: " + why +
                               "; is it serving https (fenced --tls-cert)?");
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
      bool reused = conn_.is_open();
      if (!reused) {
        if (auto s = Connect(); !s.ok()) return s;
      }
      // The write and the read have the timeout each, in real time (not Clock): the socket's.
      auto after = [&] { return std::chrono::steady_clock::now() + options_.timeout; };
      bool got_reply_bytes = false;
      httpclient::Parser parser;
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      auto ec = conn_.Write(req, after());
      if (!ec) ec = conn_.Read(parser, after(), &got_reply_bytes);
      if (ec) {
        // A reused keep-alive connection may have been closed by the server while idle;
        // retry once on a new connection, but only if the server said nothing at all.
        if (reused && !got_reply_bytes && !httpclient::TimedOut(ec)) continue;
        return Status::Unavailable("no reply from " + Where() + ": " + ec.message());
      }
      return parser.release();
    }
    return Status::Unavailable("no reply from " + Where());
  }

  const std::string host_, port_;
  StoreClientOptions options_;
  std::string authorization_;  // the Authorization header, empty for none
  // Kept alive between calls; closed after an error or when the server closes it.
  httpclient::HttpConnection conn_;
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
  std::shared_ptr<ssl::context> tls;
  if (https) {
    tls = std::make_shared<ssl::context>(ssl::context::tls_client);
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
