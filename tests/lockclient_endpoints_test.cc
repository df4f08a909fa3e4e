// The host:port list parser that redis://, redlock:// and etcd:// URIs share.
#include <gtest/gtest.h>

#include "endpoints.h"

namespace fencekit {
namespace {

TEST(EndpointsTest, ParsesAListOfHostsAndPorts) {
  auto e = ParseEndpoints("127.0.0.1:6379,redis-b:6380,[::1]:2379");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->size(), 3u);
  EXPECT_EQ((*e)[0].host, "127.0.0.1");
  EXPECT_EQ((*e)[0].port, 6379);
  EXPECT_EQ((*e)[1].host, "redis-b");
  EXPECT_EQ((*e)[1].port, 6380);
  EXPECT_EQ((*e)[2].host, "::1");
  EXPECT_EQ((*e)[2].port, 2379);
  EXPECT_EQ((*e)[0].Name(), "127.0.0.1:6379");
  EXPECT_EQ((*e)[2].Name(), "[::1]:2379");
}

TEST(EndpointsTest, DefaultPortFillsOnlyAMissingPort) {
  auto e = ParseEndpoints("localhost,[::1],other:7000", 6379);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->size(), 3u);
  EXPECT_EQ((*e)[0].port, 6379);
  EXPECT_EQ((*e)[1].host, "::1");
  EXPECT_EQ((*e)[1].port, 6379);
  EXPECT_EQ((*e)[2].port, 7000);
}

TEST(EndpointsTest, RefusesMalformedEntriesSayingWhich) {
  struct Case {
    const char* list;
    const char* says;
  } cases[] = {
      {"", "no host:port"},
      {"127.0.0.1", "needs a port"},
      {":2379", "names no host"},
      {"a:1,", "empty"},
      {",a:1", "empty"},
      {"a:1,,b:2", "empty"},
      {"a:0", "no valid port"},
      {"a:65536", "no valid port"},
      {"a:-1", "no valid port"},
      {"a:12x", "no valid port"},
      {"a:", "no valid port"},
      {"[::1", "never closes"},
      {"[::1]x", "after the IPv6 address"},
      {"[]:1", "names no host"},
  };
  for (const Case& c : cases) {
    auto e = ParseEndpoints(c.list);
    ASSERT_FALSE(e.ok()) << c.list;
    EXPECT_TRUE(e.status().IsInvalidArgument()) << c.list;
    EXPECT_NE(e.status().message().find(c.says), std::string::npos)
        << c.list << ": " << e.status().message();
  }
  EXPECT_NE(ParseEndpoints("good:1,bad:x").status().message().find("\"bad:x\""), std::string::npos);
}

}  // namespace
}  // namespace fencekit
