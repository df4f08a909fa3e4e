// The connection to etcd's v3 JSON gateway: HTTP/1.1 over Beast, a pool of keep-alive
// connections, failover between endpoints, timeouts on every call, and the gateway's reply
// conventions (int64 fields as JSON strings, errors as {"code", "message"}). It does not know
// what the lock keys mean. Private to lockclient.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "endpoints.h"
#include "fencekit/common/status.h"

namespace fencekit::etcd {

// gRPC status codes that etcd puts in the gateway's error replies.
constexpr std::int64_t kGrpcInvalidArgument = 3;
constexpr std::int64_t kGrpcDeadlineExceeded = 4;
constexpr std::int64_t kGrpcNotFound = 5;
constexpr std::int64_t kGrpcUnavailable = 14;

// An int64 field, sent by the gateway as a string (or, leniently, as a number); 0 if absent.
std::int64_t Int(const boost::json::object& o, std::string_view key);
// A field that is an object; null if absent or not an object.
const boost::json::object* Object(const boost::json::object& o, std::string_view key);
// A string field; empty if absent or not a string.
std::string String(const boost::json::object& o, std::string_view key);

// One HTTP/1.1 keep-alive connection to one gateway endpoint, with its own io_context so that
// every call can run synchronously with a deadline. Thread safety: not thread-safe; the pool
// hands it to one caller at a time.
class GatewayConn {
 public:
  struct Reply {
    int status = 0;
    std::string body;
  };

  GatewayConn(Endpoint endpoint, std::size_t index);
  GatewayConn(const GatewayConn&) = delete;
  GatewayConn& operator=(const GatewayConn&) = delete;
  ~GatewayConn();

  const Endpoint& endpoint() const { return endpoint_; }
  // The endpoint's place in the Gateway's list.
  std::size_t index() const { return index_; }
  // True once the connection was closed (an error, a timeout, or the server's choice).
  bool closed() const { return closed_; }

  Status Connect(std::chrono::milliseconds timeout);
  // POSTs a JSON body and reads the whole reply. kUnavailable on a transport error or timeout;
  // the connection is then closed.
  Result<Reply> Post(std::string_view target, const std::string& body,
                     std::chrono::milliseconds timeout);
  // Starts a streaming POST (a watch) and reads its headers. Messages then come one per line.
  Status OpenStream(std::string_view target, const std::string& body,
                    std::chrono::milliseconds timeout);
  // The stream's next message, or nullopt when none arrived within `wait`. A read left pending
  // by a nullopt carries on in the next call.
  Result<std::optional<std::string>> NextMessage(std::chrono::milliseconds wait);

 private:
  template <typename StartRead>
  Status Exchange(std::string_view target, const std::string& body,
                  std::chrono::milliseconds timeout, StartRead read);
  bool Run(bool& done, std::chrono::milliseconds timeout);
  void Close();

  using Parser = boost::beast::http::response_parser<boost::beast::http::string_body>;

  Endpoint endpoint_;
  std::size_t index_;
  boost::asio::io_context ioc_{1};  // one thread at a time: lets Asio skip its locking
  std::optional<boost::asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> stream_parser_;
  bool read_pending_ = false;
  boost::system::error_code read_ec_;
  bool closed_ = false;
};

// Connections to the gateway endpoints, with failover. Thread safety: safe for concurrent use.
class Gateway {
 public:
  // `op_timeout`: each connect and each call has this long; `pool_size`: idle connections kept.
  Gateway(std::vector<Endpoint> endpoints, std::chrono::milliseconds op_timeout, int pool_size);

  // POSTs `body` to the endpoint that answered last, else the next one. On a transport error,
  // or when etcd answers "unavailable" (no leader, leader changed), tries the next endpoint.
  // *sends counts the attempts that may have reached etcd (a retried revoke may find the
  // lease already gone). Returns the reply object, or the error etcd answered as a Status:
  // kNotFound (e.g. no such lease), kInvalidArgument, kUnavailable.
  Result<boost::json::object> Call(std::string_view target, const boost::json::object& body,
                                   int* sends);

  // A new connection (for a watch stream) to the endpoint that answered last, else the next.
  Result<std::unique_ptr<GatewayConn>> Stream();

  // The endpoint `index` failed: prefer the next one, and drop idle connections to it.
  void Failed(std::size_t index);

  std::chrono::milliseconds op_timeout() const { return op_timeout_; }

 private:
  std::unique_ptr<GatewayConn> Take(std::string* errors);
  void Give(std::unique_ptr<GatewayConn> c);
  std::unique_ptr<GatewayConn> Connect(std::string* errors);

  const std::vector<Endpoint> endpoints_;
  const std::chrono::milliseconds op_timeout_;
  const int pool_size_;
  std::mutex mu_;
  std::size_t preferred_ = 0;                       // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<GatewayConn>> idle_;  // GUARDED_BY(mu_)
};

}  // namespace fencekit::etcd
