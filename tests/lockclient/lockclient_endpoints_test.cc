// The host:port list parser that redis://, redlock:// and etcd:// URIs share, and the rest of
// etcd:// and etcds:// URIs (credentials, TLS files, the key prefix).
#include <gtest/gtest.h>

#include "endpoints.h"
#include "etcd/uri.h"

namespace fencekit::lockclient {
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

TEST(EtcdUriTest, ReadsEveryPartAndShowsItWithoutThePassword) {
  auto u = ParseEtcdUri(
      "etcds://app%40corp:p%2Fw%3Fd%40x@h1:2379,[::1]:2380/"
      "?prefix=team/locks/&cacert=%2Fetc%2Fca.pem&cert=/c%20d.pem&key=/k.pem");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->tls);
  ASSERT_EQ(u->endpoints.size(), 2u);
  EXPECT_EQ(u->endpoints[1].Name(), "[::1]:2380");
  EXPECT_EQ(u->user, "app@corp");
  EXPECT_EQ(u->password, "p/w?d@x");
  EXPECT_EQ(u->key_prefix, "team/locks/");
  EXPECT_EQ(u->ca_file, "/etc/ca.pem");
  EXPECT_EQ(u->cert_file, "/c d.pem");
  EXPECT_EQ(u->key_file, "/k.pem");
  EXPECT_EQ(u->shown, "etcds://app%40corp@h1:2379,[::1]:2380?prefix=team/locks/");

  auto plain = ParseEtcdUri("etcd://127.0.0.1:2379");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->tls);
  EXPECT_TRUE(plain->user.empty());
  EXPECT_EQ(plain->key_prefix, "fencekit/");
  EXPECT_EQ(plain->shown, "etcd://127.0.0.1:2379");
}

TEST(EtcdUriTest, RefusesMalformedUrisSayingWhyAndNeverShowingThePassword) {
  const std::string secret = "s3cret-PW";
  struct Case {
    std::string uri;
    const char* says;
  } cases[] = {
      {"etcd://", "no host:port"},
      {"etcd://u@h:1", "without a password"},
      {"etcd://:" + secret + "@h:1", "user name is empty"},
      {"etcd://u:@h:1", "password is empty"},
      {"etcd://u%0a:" + secret + "@h:1", "control character"},
      {"etcd://u:%zz" + secret + "@h:1", "% not followed"},
      {"etcd://u:" + secret + "/x@h:1", "must percent-encode"},
      {"etcd://u:" + secret + "?x@h:1", "must percent-encode"},
      {"etcd://h:1/path", "path or a fragment"},
      {"etcd://h:1#frag", "path or a fragment"},
      {"etcd://h:1?color=red", "unknown parameter \"color\""},
      {"etcd://u:" + secret + "@h:1?color=1", "unknown parameter ("},
      {"etcd://h:1?prefix", "prefix has no value"},
      {"etcd://h:1?prefix=a/&prefix=b/", "prefix twice"},
      {"etcd://h:1?prefix=app", "does not end in /"},
      {"etcd://h:1?prefix=a%20b/", "outside the allowed"},
      {"etcd://h:1?prefix=" + std::string(300, 'a') + "/", "too long"},
      {"etcd://h:1?cacert=/ca.pem", "use etcds://"},
      {"etcds://h:1?cacert=/a.pem&cacert=/b.pem", "cacert twice"},
      {"etcds://h:1?cert=/c.pem", "both cert=FILE and key=FILE"},
      {"etcds://h:1?key=/k.pem", "both cert=FILE and key=FILE"},
      {"etcds://h:1?cacert=%00", "not a usable path"},
      {"http://h:1", "neither etcd:// nor etcds://"},
  };
  for (const Case& c : cases) {
    auto u = ParseEtcdUri(c.uri);
    ASSERT_FALSE(u.ok()) << c.uri;
    EXPECT_TRUE(u.status().IsInvalidArgument()) << c.uri;
    EXPECT_NE(u.status().message().find(c.says), std::string::npos)
        << c.uri << ": " << u.status().message();
    EXPECT_NE(u.status().message().find("etcd://h1:p1"), std::string::npos) << c.uri;
    EXPECT_EQ(u.status().message().find(secret), std::string::npos) << u.status().message();
  }
}

TEST(EtcdUriTest, PrefixRuleAllowsOnlyItsCharactersAndATrailingSlash) {
  for (const char* good : {"fencekit/", "a/", "My-App_2.0/locks/", "/"}) {
    EXPECT_TRUE(CheckEtcdKeyPrefix(good).ok()) << good;
  }
  for (const char* bad : {"", "a", "a b/", "a\n/", "ünï/", "a*/", "a?/"}) {
    Status s = CheckEtcdKeyPrefix(bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("A-Z a-z 0-9 . _ - /"), std::string::npos) << s.message();
  }
}

TEST(EndpointsTest, UriWithoutPasswordHidesThePasswordOfWellFormedAndMalformedUris) {
  EXPECT_EQ(UriWithoutPassword("etcd://u:pw@h:1?prefix=a/"), "etcd://u:***@h:1?prefix=a/");
  EXPECT_EQ(UriWithoutPassword("etcds://u:p/w?x@h:1"), "etcds://u:***@h:1");
  EXPECT_EQ(UriWithoutPassword("etcd://h:1"), "etcd://h:1");
  EXPECT_EQ(UriWithoutPassword("etcd://u@h:1"), "etcd://u@h:1");
  EXPECT_EQ(UriWithoutPassword("no scheme:pw@h"), "no scheme:pw@h");
  EXPECT_EQ(UriWithoutPassword("redis://:pw@h:6379/0"), "redis://:***@h:6379/0");
}

}  // namespace
}  // namespace fencekit::lockclient
