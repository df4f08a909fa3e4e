// The connection to etcd's v3 JSON gateway: HTTP/1.1 over Beast (HTTPS for etcds://), a pool
// of keep-alive connections, failover between endpoints, timeouts on every call, the auth token
// of a user (sent with every call, renewed when etcd no longer accepts it), and the gateway's
// reply conventions (int64 fields as JSON strings, errors as {"code", "message"}). It does not
// know what the lock keys mean. Private to lockclient.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "endpoints.h"
#include "fencekit/common/clock.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace fencekit::httpclient {
class HttpConnection;
}  // namespace fencekit::httpclient

namespace fencekit::lockclient::etcd {

// gRPC status codes that etcd puts in the gateway's error replies.
constexpr std::int64_t kGrpcInvalidArgument = 3;
constexpr std::int64_t kGrpcDeadlineExceeded = 4;
constexpr std::int64_t kGrpcNotFound = 5;
constexpr std::int64_t kGrpcPermissionDenied = 7;
constexpr std::int64_t kGrpcResourceExhausted = 8;
constexpr std::int64_t kGrpcFailedPrecondition = 9;
constexpr std::int64_t kGrpcUnavailable = 14;
constexpr std::int64_t kGrpcUnauthenticated = 16;

// How to reach etcd beyond its addresses. Thread safety: a value.
struct GatewayAccess {
  // Every connection speaks TLS with this context (etcd/tls.h); null: plain HTTP.
  std::shared_ptr<boost::asio::ssl::context> tls;
  // Non-empty: authenticate as this user and send its token with every call. The password
  // goes to /v3/auth/authenticate only, never into a message.
  std::string user, password;
};

// An int64 field, sent by the gateway as a string (or, leniently, as a number); 0 if absent.
std::int64_t Int(const boost::json::object& o, std::string_view key);
// A field that is an object; null if absent or not an object.
const boost::json::object* Object(const boost::json::object& o, std::string_view key);
// A string field; empty if absent or not a string.
std::string String(const boost::json::object& o, std::string_view key);

// One HTTP/1.1 keep-alive connection (over TLS when given a context) to one gateway endpoint,
// every call run synchronously with a deadline (httpclient::HttpConnection). Thread safety: not
// thread-safe; the pool hands it to one caller at a time.
class GatewayConn {
 public:
  struct Reply {
    int status = 0;
    std::string body;
  };

  GatewayConn(Endpoint endpoint, std::size_t index,
              std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  GatewayConn(const GatewayConn&) = delete;
  GatewayConn& operator=(const GatewayConn&) = delete;
  ~GatewayConn();

  const Endpoint& endpoint() const { return endpoint_; }
  // The endpoint's place in the Gateway's list.
  std::size_t index() const { return index_; }
  // True once the connection was closed (an error, a timeout, or the server's choice), and
  // before it was opened.
  bool closed() const;

  // Connects; with TLS also shakes hands, checking that etcd's certificate is signed by a
  // trusted CA and names the endpoint's host (its DNS name or IP address).
  Status Connect(std::chrono::milliseconds timeout);
  // POSTs a JSON body, with `token` (if not empty) as the auth token, and reads the whole
  // reply. kUnavailable on a transport error or timeout; the connection is then closed.
  Result<Reply> Post(std::string_view target, const std::string& body, const std::string& token,
                     std::chrono::milliseconds timeout);
  // Starts a streaming POST (a watch) and reads its headers. Messages then come one per line.
  Status OpenStream(std::string_view target, const std::string& body, const std::string& token,
                    std::chrono::milliseconds timeout);
  // The auth token the last request on this connection sent ("" for none).
  const std::string& token() const { return token_; }
  // The stream's next message, or nullopt when none arrived within `wait`. A read left pending
  // by a nullopt carries on in the next call.
  Result<std::optional<std::string>> NextMessage(std::chrono::milliseconds wait);

 private:
  // POSTs `body`, then reads the whole reply into *reply, or with `reply` null the header of a
  // stream. On an error the connection is closed.
  Status Exchange(std::string_view target, const std::string& body, const std::string& token,
                  std::chrono::milliseconds timeout, Reply* reply);

  Endpoint endpoint_;
  std::size_t index_;
  std::unique_ptr<httpclient::HttpConnection> conn_;
  std::string token_;
  std::size_t scanned_ = 0;  // the stream body's first bytes, known to hold no newline
};

// Connections to the gateway endpoints, with failover, and the user's auth token. Thread
// safety: safe for concurrent use.
class Gateway {
 public:
  // `op_timeout`: each connect and each call has this long; `pool_size`: idle connections kept.
  // `clock` (null: the real one) times the pauses between retries and when they give up.
  Gateway(std::vector<Endpoint> endpoints, std::chrono::milliseconds op_timeout, int pool_size,
          GatewayAccess access = {}, Clock* clock = nullptr);

  // POSTs `body` to the endpoint that answered last, else the next one. On a transport error,
  // or when etcd answers "unavailable" (no leader, leader changed), tries the next endpoint.
  // With a user, authenticates first (once; again when etcd no longer accepts the token, and
  // then sends the call once more). *sends counts the attempts that may have changed etcd (a
  // retried revoke may find the lease already gone). Returns the reply object, or the error
  // etcd answered as a Status: kNotFound (e.g. no such lease), kInvalidArgument,
  // kUnauthenticated (wrong user or password; authentication needed), kPermissionDenied (the
  // user may not do this), kUnavailable.
  Result<boost::json::object> Call(std::string_view target, const boost::json::object& body,
                                   int* sends);

  // Starts a streaming call (a watch) on a new connection to the endpoint that answered last,
  // else the next; its messages then come with NextMessage.
  Result<std::unique_ptr<GatewayConn>> Stream(std::string_view target, const std::string& body);
  // etcd refused a streaming call in its first message, with `reason` as a canceled watch
  // gives it ("rpc error: code = NAME desc = TEXT"). Returns the error as Call would; but when
  // etcd refused the auth token that `conn` sent and a new token was obtained, returns OK with
  // *retry set.
  Status StreamRefused(const GatewayConn& conn, std::string_view reason, bool* retry);

  // The endpoint `index` failed: prefer the next one, and drop idle connections to it.
  void Failed(std::size_t index);

  std::chrono::milliseconds op_timeout() const { return op_timeout_; }

 private:
  // An error etcd answered, and where.
  struct Refusal {
    std::int64_t code = 0;  // gRPC code; 0 when etcd refused nothing
    std::string message;    // etcd's, made printable
    std::string where;      // the endpoint
  };
  // One call with failover and `token`; fills *refusal when etcd answered an error.
  Result<boost::json::object> Send(std::string_view target, const std::string& text,
                                   const std::string& token, int* sends, Refusal* refusal);
  // The error etcd answered, as a Status.
  Status Refused(const Refusal& r) const;
  // Whether etcd refused for want of a valid auth token.
  static bool RefusedForAuth(const Refusal& r);
  // Whether a new auth token may cure `r`: RefusedForAuth, and there is a user.
  bool TokenRefused(const Refusal& r) const;
  // The token to send: "" without a user; else the current one, authenticating first.
  Result<std::string> Token();
  // A token other than `refused`: the one another caller got meanwhile, or a new one.
  Result<std::string> Renew(const std::string& refused);
  Result<std::string> Authenticate();

  std::unique_ptr<GatewayConn> Take(std::string* errors);
  void Give(std::unique_ptr<GatewayConn> c);
  std::unique_ptr<GatewayConn> Connect(std::string* errors);

  const std::vector<Endpoint> endpoints_;
  const std::chrono::milliseconds op_timeout_;
  const int pool_size_;
  const GatewayAccess access_;
  Clock* const clock_;
  Mutex auth_mu_;  // held while authenticating: one authentication at a time
  Mutex mu_;
  std::size_t preferred_ FENCEKIT_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<GatewayConn>> idle_ FENCEKIT_GUARDED_BY(mu_);
  // token_ is current (or etcd has auth off).
  bool authenticated_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::string token_ FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit::lockclient::etcd
