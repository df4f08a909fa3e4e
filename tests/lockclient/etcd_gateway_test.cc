// The etcd gateway connection (private to lockclient) against a hostile peer on loopback: what
// a broken or impersonated etcd can send must not grow without bound in the client.
#include "etcd/gateway.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace fencekit::lockclient::etcd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Accepts one connection, reads the request's headers, answers 200 with a chunked body and then
// sends `bytes` bytes of 'x' (never a newline), stopping early when the client goes away.
class EndlessLinePeer {
 public:
  explicit EndlessLinePeer(std::size_t bytes) : bytes_(bytes) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~EndlessLinePeer() {
    shutdown(listener_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  std::size_t sent() const { return sent_; }

 private:
  void Serve() {
    int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return;
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    bool ok = write(conn, head.data(), head.size()) == static_cast<ssize_t>(head.size());
    std::string chunk = "100000\r\n" + std::string(1 << 20, 'x') + "\r\n";  // 1 MiB
    while (ok && sent_ < bytes_) {
      ok = send(conn, chunk.data(), chunk.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(chunk.size());
      if (ok) sent_ += 1 << 20;
    }
    close(conn);
  }

  std::size_t bytes_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<std::size_t> sent_{0};
};

TEST(EtcdGatewayTest, AWatchMessageWithoutEndIsRefusedAtItsBoundNotHeldInMemory) {
  EndlessLinePeer peer(std::size_t{200} << 20);
  GatewayConn conn(Endpoint{"127.0.0.1", peer.port()}, 0);
  ASSERT_TRUE(conn.Connect(seconds(5)).ok());
  ASSERT_TRUE(conn.OpenStream("/v3/watch", "{}", "", seconds(5)).ok());
  const auto began = std::chrono::steady_clock::now();
  Result<std::optional<std::string>> message = std::optional<std::string>();
  for (int i = 0; i < 1000 && message.ok() && !message->has_value(); ++i) {
    message = conn.NextMessage(milliseconds(500));
  }
  ASSERT_FALSE(message.ok()) << "a message arrived, or none in 500 s";
  EXPECT_TRUE(message.status().IsUnavailable()) << message.status().ToString();
  EXPECT_NE(message.status().message().find("watch message of over 64 MiB"), std::string::npos)
      << message.status().message();
  EXPECT_TRUE(conn.closed());
  EXPECT_LT(peer.sent(), std::size_t{200} << 20) << "read to the peer's end";
  // Searching the whole of a growing message for its newline after every read took 170 s here;
  // searching each byte once takes well under a second.
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(30));
}

}  // namespace
}  // namespace fencekit::lockclient::etcd
