// One synchronous HTTP/1.1 keep-alive connection to one host:port, over TLS when given a
// context: the transport of the store client (httpapi) and of the etcd gateway (lockclient).
// Every step runs on the connection's own io_context until it completes or its deadline passes
// (no timer objects: the wait itself is bounded); a step that fails or runs late closes the
// connection. Failures come back as data (the step, the error, why a certificate was not
// trusted): each caller words them and adds its own hints. Internal (fencekit_httpclient).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace fencekit::httpclient {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Parser = boost::beast::http::response_parser<boost::beast::http::string_body>;
using Deadline = std::chrono::steady_clock::time_point;

// The error a step reports when its deadline passed (boost::beast::error::timeout).
bool TimedOut(const boost::system::error_code& ec);

// Why Connect failed. Thread safety: a value.
struct ConnectFailure {
  enum class Step {
    kResolve,    // the host name did not resolve
    kPeerName,   // OpenSSL would not take the host as the name to check
    kConnect,    // no TCP connection
    kHandshake,  // the TLS handshake failed
  };
  Step step = Step::kResolve;
  boost::system::error_code ec;  // TimedOut(ec) when the step ran out of time
  // kHandshake: OpenSSL's reason why the peer's certificate was not trusted; empty when the
  // certificate was not the cause.
  std::string untrusted;

  // "the TLS certificate of `peer` is not trusted: REASON; `hint`".
  std::string NotTrusted(std::string_view peer, std::string_view hint) const;
};

// A blocking name lookup, as boost::asio::ip::tcp::resolver::resolve: the system's resolver
// (getaddrinfo) unless a test gives another. It may run on a thread of its own and outlive the
// connection that started it: it must not refer to it.
using Resolver = std::function<boost::asio::ip::tcp::resolver::results_type(
    const std::string& host, const std::string& port, boost::system::error_code& ec)>;

// The connection. Thread safety: not thread-safe; one caller at a time.
class HttpConnection {
 public:
  // `host` as the URL gives it (a DNS name or an IP address); `tls` null: plain HTTP.
  // `resolve`: how a DNS name is looked up (empty: the system's resolver).
  HttpConnection(std::string host, std::string port, std::shared_ptr<boost::asio::ssl::context> tls,
                 Resolver resolve = {});
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection();

  bool is_open() const { return plain_.has_value() || secure_.has_value(); }
  bool tls() const { return tls_ != nullptr; }

  // Closes any connection, resolves the host within `timeout` (a DNS name on a thread of its
  // own: getaddrinfo has no deadline; one still running past `timeout` is left to finish
  // alone), connects within `timeout` and, with TLS, shakes hands within `timeout` again. The one
  // peer check: the certificate must be signed by a CA the context trusts and name the host as
  // given, a DNS name (also sent as SNI) or an IP address. nullopt when connected.
  std::optional<ConnectFailure> Connect(std::chrono::milliseconds timeout);

  // Writes `req` by `deadline`.
  boost::system::error_code Write(const Request& req, Deadline deadline);
  // Reads one whole response into `parser` (whose body limit is the caller's) by `deadline`;
  // then closes the connection if the response does not keep it alive. *got_bytes (if given):
  // whether any of a response arrived, even on an error.
  boost::system::error_code Read(Parser& parser, Deadline deadline, bool* got_bytes = nullptr);

  // A response whose body comes over time (a watch): reads its header by `deadline` into the
  // connection's own parser, which has no body limit (the caller bounds what it keeps).
  boost::system::error_code ReadStreamHeader(Deadline deadline);
  // The streamed response, for the caller to read and consume its body. Valid from a
  // successful ReadStreamHeader until the connection closes.
  Parser& stream() { return *stream_; }
  // Waits until `until` for more of the streamed body. No error and *arrived false when the
  // wait ran out: the read is left pending and carries on in the next call.
  boost::system::error_code ReadMore(Deadline until, bool* arrived);

  // Closes the connection (no TLS close_notify: it would cost a round trip, and neither peer
  // needs one). Completes every pending handler before it returns.
  void Close();

 private:
  // Calls f(stream) with the TLS stream or the plain socket, whichever is open.
  template <typename F>
  void WithStream(F f);
  // Starts an operation, start(handler), and runs it until it completes or `deadline`:
  // beast::error::timeout when it ran late.
  template <typename Start>
  boost::system::error_code Await(Deadline deadline, Start start);
  // Runs queued operations until `done` or `deadline`. False on a timeout, after closing the
  // connection, which completes every pending handler now: none is left that refers to the
  // caller's frame.
  bool Run(const bool& done, Deadline deadline);
  // Sets what the peer's certificate must name, and SNI for a DNS name; false when OpenSSL
  // does not take the host.
  bool NamePeer();

  // The host's addresses, or the lookup's error; beast::error::timeout past `timeout`.
  boost::system::error_code Resolve(std::chrono::milliseconds timeout,
                                    boost::asio::ip::tcp::resolver::results_type* out);

  const std::string host_, port_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
  const Resolver resolve_;
  boost::asio::io_context ioc_{1};  // one thread at a time: lets Asio skip its locking
  // The open connection, if any: one of the two.
  std::optional<boost::asio::ip::tcp::socket> plain_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> secure_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> stream_;  // the streamed response, from ReadStreamHeader
  bool read_pending_ = false;     // a ReadMore's read has not completed yet
  boost::system::error_code read_ec_;
};

}  // namespace fencekit::httpclient
