// HttpConnection's name lookup: bounded by the connect timeout, however long the name service
// takes; an IP address needs none. Against a real listening socket on loopback; only the name
// service is replaced, where a test needs one that hangs or fails.
#include "httpclient/http_connection.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>

namespace fencekit::httpclient {
namespace {

using boost::system::error_code;
using std::chrono::milliseconds;
using tcp = boost::asio::ip::tcp;

// A socket listening on 127.0.0.1: the kernel completes connections to it without an accept.
class Listener {
 public:
  Listener() : acceptor_(ioc_, tcp::endpoint(tcp::v4(), 0)) {}
  std::string port() const { return std::to_string(acceptor_.local_endpoint().port()); }

 private:
  boost::asio::io_context ioc_;
  tcp::acceptor acceptor_;
};

tcp::resolver::results_type Loopback(const std::string& port) {
  boost::asio::io_context ioc;
  tcp::resolver resolver(ioc);
  return resolver.resolve("127.0.0.1", port);
}

TEST(HttpConnectionTest, ANameWhoseLookupHangsFailsTheConnectWithinItsTimeout) {
  Listener listener;
  // The name service answers only when released (or after 10 s, so that a connection that
  // waited for it is seen to have done so).
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  const std::string port = listener.port();
  HttpConnection conn("hangs.example", port, nullptr,
                      [released, port](const std::string&, const std::string&, error_code& ec) {
                        released.wait_for(std::chrono::seconds(10));
                        ec = {};
                        return Loopback(port);
                      });
  const auto began = std::chrono::steady_clock::now();
  auto failed = conn.Connect(milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - began;
  release->set_value();
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->step, ConnectFailure::Step::kResolve);
  EXPECT_TRUE(TimedOut(failed->ec)) << failed->ec.message();
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_FALSE(conn.is_open());
}

TEST(HttpConnectionTest, ALookupThatFailsSaysWhy) {
  HttpConnection conn("nowhere.example", "80", nullptr,
                      [](const std::string&, const std::string&, error_code& ec) {
                        ec = boost::asio::error::host_not_found;
                        return tcp::resolver::results_type();
                      });
  auto failed = conn.Connect(milliseconds(2000));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->step, ConnectFailure::Step::kResolve);
  EXPECT_EQ(failed->ec, boost::asio::error::host_not_found);
}

TEST(HttpConnectionTest, ANameIsLookedUpAndConnected) {
  Listener listener;
  std::atomic<int> lookups{0};
  const std::string port = listener.port();
  HttpConnection conn(
      "service.example", port, nullptr,
      [&lookups, port](const std::string& host, const std::string& p, error_code& ec) {
        ++lookups;
        EXPECT_EQ(host, "service.example");
        EXPECT_EQ(p, port);
        ec = {};
        return Loopback(port);
      });
  EXPECT_FALSE(conn.Connect(milliseconds(5000)).has_value());
  EXPECT_TRUE(conn.is_open());
  EXPECT_EQ(lookups.load(), 1);
}

TEST(HttpConnectionTest, TheSystemsNameServiceResolvesLocalhost) {
  Listener listener;
  HttpConnection conn("localhost", listener.port(), nullptr);
  EXPECT_FALSE(conn.Connect(milliseconds(5000)).has_value());
  EXPECT_TRUE(conn.is_open());
}

TEST(HttpConnectionTest, AnIpAddressIsNotLookedUp) {
  Listener listener;
  std::atomic<int> lookups{0};
  HttpConnection conn("127.0.0.1", listener.port(), nullptr,
                      [&lookups](const std::string&, const std::string&, error_code& ec) {
                        ++lookups;
                        ec = boost::asio::error::host_not_found;
                        return tcp::resolver::results_type();
                      });
  EXPECT_FALSE(conn.Connect(milliseconds(5000)).has_value());
  EXPECT_EQ(lookups.load(), 0);
}

}  // namespace
}  // namespace fencekit::httpclient
