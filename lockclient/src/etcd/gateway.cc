// Gateway: the pool of connections to etcd's gateway endpoints, failover between them, and
// the gateway's reply conventions. The auth token's lifecycle is in auth.cc, one
// connection in gateway_conn.cc.
#include "etcd/gateway.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

#include "fencekit/common/mutex.h"

namespace fencekit::lockclient::etcd {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

constexpr std::size_t kMaxShownBytes = 200;

// Text etcd sent, fit for a message: printable ASCII (anything else becomes '?'), cut short.
std::string Shown(std::string_view text) {
  std::string out(text.substr(0, kMaxShownBytes));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (text.size() > kMaxShownBytes) out += "...";
  return out;
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
  MutexLock lock(mu_);
  if (preferred_ == index) preferred_ = (index + 1) % endpoints_.size();
  std::erase_if(idle_, [&](const auto& c) { return c->index() == index; });
}

std::unique_ptr<GatewayConn> Gateway::Take(std::string* errors) {
  {
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  if (static_cast<int>(idle_.size()) < std::max(pool_size_, 1)) idle_.push_back(std::move(c));
}

std::unique_ptr<GatewayConn> Gateway::Connect(std::string* errors) {
  std::size_t start;
  {
    MutexLock lock(mu_);
    start = preferred_;
  }
  for (std::size_t k = 0; k < endpoints_.size(); ++k) {
    std::size_t i = (start + k) % endpoints_.size();
    auto c = std::make_unique<GatewayConn>(endpoints_[i], i, access_.tls);
    Status s = c->Connect(op_timeout_);
    if (s.ok()) {
      MutexLock lock(mu_);
      preferred_ = i;
      return c;
    }
    *errors += "; " + s.message();
  }
  return nullptr;
}

}  // namespace fencekit::lockclient::etcd
