// etcds:// and etcd authentication against a real etcd: HTTPS with a CA and client certificates
// made at test time by the openssl command (etcd started with --client-cert-auth), and a user
// whose role grants readwrite on one key prefix only. Acquire, a waiter in line, Extend and
// Release work; bad certificates, a wrong password and a user without permission on the prefix
// each give a clear error that never shows the password; an expired auth token is renewed.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <thread>

#include "fencekit/common/text.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/servers/etcd_server.h"
#include "support/servers/lock_services.h"
#include "support/pki.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::CommandResult;
using testing::EtcdCluster;
using testing::Pki;
using testing::Soon;
using testing::TempDir;
using testing::WaitFor;

constexpr char kAppPassword[] = "app-Secret-pw.42";
constexpr char kNobodyPassword[] = "nobody-Secret-pw.7";

std::unique_ptr<LockClient> Open(const std::string& uri) { return testing::OpenLockClient(uri); }

// The last token issued for `lock`: it moves when a waiter joins the line.
std::int64_t LastIssued(LockClient& client, const std::string& lock) {
  auto info = client.Inspect(lock);
  return info.ok() && info->last_token ? info->last_token->value() : 0;
}

// One client holds "job", renews it, and a second waits in line until the first releases.
void AcquireWaitRenewRelease(LockClient& holder_client, LockClient& waiter_client) {
  auto held = holder_client.TryAcquire("job", 30s);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  Status renewed = holder_client.Extend(*held);
  EXPECT_TRUE(renewed.ok()) << renewed.ToString();
  auto waiter =
      std::async(std::launch::async, [&] { return waiter_client.Acquire("job", 30s, 30s); });
  ASSERT_TRUE(WaitFor([&] { return LastIssued(holder_client, "job") > held->token.value(); }))
      << "the waiter never joined the line";
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "granted while held";
  Status released = holder_client.Release(*held);
  EXPECT_TRUE(released.ok()) << released.ToString();
  auto granted = waiter.get();
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  EXPECT_GT(granted->token, held->token);
  EXPECT_TRUE(waiter_client.Extend(*granted).ok());
  EXPECT_TRUE(waiter_client.Release(*granted).ok());
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  // HTTPS with the "server" certificate (or `server_cert`), client certificates required.
  static procutil::EtcdOptions TlsOptions(const std::string& server_cert = "server") {
    return {.tls_cert_file = pki_->cert(server_cert),
            .tls_key_file = pki_->key(server_cert),
            .client_ca_file = pki_->ca()};
  }
  // "?cacert=...&cert=...&key=...": the client certificate `client` ("" for none). With
  // authentication on, etcd's gateway wants one without a CommonName: "anonymous".
  static std::string Query(const std::string& client = "client") {
    std::string q = "?cacert=" + PercentEncode(pki_->ca());
    if (!client.empty()) {
      q +=
          "&cert=" + PercentEncode(pki_->cert(client)) + "&key=" + PercentEncode(pki_->key(client));
    }
    return q;
  }
  // The query of the auth tests.
  static std::string AuthQuery(const std::string& prefix_param = "&prefix=app/") {
    return Query("anonymous") + prefix_param;
  }
  // "etcds://[userinfo@]127.0.0.1:port"
  static std::string Base(const EtcdCluster& etcd, const std::string& userinfo = "",
                          const std::string& host = "127.0.0.1") {
    return "etcds://" + userinfo + host + ":" + std::to_string(etcd.client_port(0));
  }
  // A TLS member with authentication on: "app" may read and write the keys under "app/"
  // only, "nobody" has no role.
  static void EnableAuth(EtcdCluster& etcd) {
    Status s = etcd.EnableAuth("root-pw",
                               {{"app", kAppPassword, "app/"}, {"nobody", kNobodyPassword, ""}});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  static Pki* pki_;
};
Pki* EtcdTlsTest::pki_ = nullptr;

TEST_F(EtcdTlsTest, AcquireWaitRenewAndReleaseOverHttpsWithAClientCertificate) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  ASSERT_TRUE(etcd.uri().starts_with("etcds://")) << etcd.uri();
  auto by_address = Open(etcd.uri() + Query());
  // The certificate names localhost too: a client that dials the name is satisfied as well.
  auto by_name = Open(Base(etcd, "", "localhost") + Query());
  ASSERT_NE(by_address, nullptr);
  ASSERT_NE(by_name, nullptr);
  EXPECT_EQ(by_address->service(), "etcds://127.0.0.1:" + std::to_string(etcd.client_port(0)));
  AcquireWaitRenewRelease(*by_address, *by_name);
  EXPECT_EQ(etcd.CountKeys("fencekit/lock/"), 0);
  EXPECT_EQ(etcd.CountKeys("fencekit/last/"), 1);
}

TEST_F(EtcdTlsTest, UntrustedServerMissingClientCertificateOrWrongSchemeIsRefusedSayingWhy) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  struct Case {
    std::string uri;
    std::string says;
  } cases[] = {
      // No cacert=: the system's CAs do not know the test CA.
      {Base(etcd) + "?cert=" + pki_->cert("client") + "&key=" + pki_->key("client"), "not trusted"},
      {Base(etcd) + Query(""), "cert=FILE&key=FILE"},
      // Plain HTTP to the HTTPS port, and HTTPS to a plain HTTP port.
      {"etcd://127.0.0.1:" + std::to_string(etcd.client_port(0)), "use etcds://"},
      {"etcds://127.0.0.1:" + std::to_string(etcd.admin_port(0)) + Query(), "serving https"},
  };
  for (const Case& c : cases) {
    auto client = LockClient::Open(c.uri);
    ASSERT_FALSE(client.ok()) << c.uri;
    EXPECT_TRUE(client.status().IsUnavailable()) << c.uri << ": " << client.status().ToString();
    EXPECT_NE(client.status().message().find(c.says), std::string::npos)
        << c.uri << ": " << client.status().message();
  }
  auto untrusted = LockClient::Open(cases[0].uri);
  EXPECT_NE(untrusted.status().message().find("cacert=FILE"), std::string::npos)
      << untrusted.status().message();
}

TEST_F(EtcdTlsTest, CertificateForAnotherHostIsRefused) {
  EtcdCluster etcd(TlsOptions("other"));  // DNS:other.example only
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  auto client = LockClient::Open(etcd.uri() + Query());
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().IsUnavailable()) << client.status().ToString();
  EXPECT_NE(client.status().message().find("not trusted"), std::string::npos)
      << client.status().message();
  EXPECT_NE(client.status().message().find("mismatch"), std::string::npos)
      << client.status().message();
}

TEST_F(EtcdTlsTest, UnusableTlsFilesAreRefusedAtOpenNamingTheFileAndItsParameter) {
  TempDir dir;
  std::string garbage = dir.File("garbage.pem");
  std::ofstream(garbage) << "not a certificate\n";
  std::string host = "etcds://127.0.0.1:1";  // never dialled: the files are checked first
  std::string client = "&cert=" + pki_->cert("client") + "&key=" + pki_->key("client");
  struct Case {
    std::string uri;
    std::vector<std::string> says;
  } cases[] = {
      {host + "?cacert=" + dir.File("absent.pem"), {"absent.pem", "cacert=", "cannot read"}},
      {host + "?cacert=" + garbage, {"garbage.pem", "cacert=", "no PEM certificate"}},
      {host + "?cacert=/dev/zero", {"/dev/zero", "not a regular file"}},
      {host + "?cacert=" + pki_->ca() + "&cert=" + garbage + "&key=" + pki_->key("client"),
       {"garbage.pem", "cert=", "not a PEM certificate chain"}},
      {host + "?cacert=" + pki_->ca() + "&cert=" + pki_->cert("client") +
           "&key=" + pki_->key("server"),
       {"server.key", "key=", "not the PEM private key"}},
      {host + "?cacert=" + pki_->ca() + "&cert=" + pki_->cert("client"),
       {"both cert=FILE and key=FILE"}},
      {"etcd://127.0.0.1:1?cacert=" + pki_->ca(), {"use etcds://"}},
  };
  for (const Case& c : cases) {
    auto opened = LockClient::Open(c.uri);
    ASSERT_FALSE(opened.ok()) << c.uri;
    EXPECT_TRUE(opened.status().IsInvalidArgument()) << c.uri << ": " << opened.status().ToString();
    for (const std::string& part : c.says) {
      EXPECT_NE(opened.status().message().find(part), std::string::npos)
          << c.uri << " should say " << part << ": " << opened.status().message();
    }
  }
}

TEST_F(EtcdTlsTest, UserLimitedToAPrefixAcquiresWaitsRenewsAndReleasesUnderIt) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  std::string uri = Base(etcd, std::string("app:") + kAppPassword + "@") + AuthQuery();
  auto a = Open(uri);
  auto b = Open(uri);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->service(),
            "etcds://app@127.0.0.1:" + std::to_string(etcd.client_port(0)) + "?prefix=app/");
  AcquireWaitRenewRelease(*a, *b);
  // Every key is under the prefix (the role allows nothing else anyway).
  EXPECT_EQ(etcd.CountKeys("app/last/"), 1);
  EXPECT_EQ(etcd.CountKeys("fencekit/"), 0);
}

TEST_F(EtcdTlsTest, WrongPasswordOrUnknownUserIsUnauthenticatedNeverShowingThePassword) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  const std::string wrong = "Wrong-pw-991";
  for (std::string user : {"app", "ghost"}) {
    auto client = LockClient::Open(Base(etcd, user + ":" + wrong + "@") + AuthQuery());
    ASSERT_FALSE(client.ok()) << user;
    const Status status = client.status();
    EXPECT_TRUE(status.IsUnauthenticated()) << status.ToString();
    EXPECT_NE(status.message().find("refused user \"" + user + "\""), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("check the user name and password"), std::string::npos)
        << status.message();
    EXPECT_EQ(status.message().find(wrong), std::string::npos) << status.message();
  }
  // The same user over plain HTTP (the member's loopback admin port) works.
  std::string plain = "etcd://app:" + std::string(kAppPassword) +
                      "@127.0.0.1:" + std::to_string(etcd.admin_port(0)) + "?prefix=app/";
  auto client = Open(plain);
  ASSERT_NE(client, nullptr);
  auto lease = client->TryAcquire("plain");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(client->Release(*lease).ok());
}

TEST_F(EtcdTlsTest, NoUserOnAnEtcdWithAuthenticationIsToldToGiveOne) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  // Plain HTTP: etcd says a user is needed.
  auto plain =
      LockClient::Open("etcd://127.0.0.1:" + std::to_string(etcd.admin_port(0)) + "?prefix=app/");
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(plain.status().IsUnauthenticated()) << plain.status().ToString();
  EXPECT_NE(plain.status().message().find("etcd://user:password@"), std::string::npos)
      << plain.status().message();
  // HTTPS with a client certificate: etcd's gateway makes the call as the user its own
  // certificate names, who may do nothing.
  auto tls = LockClient::Open(Base(etcd) + AuthQuery());
  ASSERT_FALSE(tls.ok());
  EXPECT_TRUE(tls.status().IsPermissionDenied()) << tls.status().ToString();
  EXPECT_NE(tls.status().message().find("etcd://user:password@"), std::string::npos)
      << tls.status().message();
}

TEST_F(EtcdTlsTest, UserWithoutPermissionOnThePrefixIsPermissionDeniedSayingWhatToGrant) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  struct Case {
    std::string userinfo, prefix_param, user, prefix;
  } cases[] = {
      {std::string("app:") + kAppPassword + "@", "", "app", "fencekit/"},  // the default prefix
      {std::string("nobody:") + kNobodyPassword + "@", "&prefix=app/", "nobody", "app/"},
  };
  for (const Case& c : cases) {
    auto client = LockClient::Open(Base(etcd, c.userinfo) + AuthQuery(c.prefix_param));
    ASSERT_FALSE(client.ok()) << c.user;
    const Status status = client.status();
    const std::string& m = status.message();
    EXPECT_TRUE(status.IsPermissionDenied()) << status.ToString();
    EXPECT_NE(m.find("user \"" + c.user + "\""), std::string::npos) << m;
    EXPECT_NE(m.find("under \"" + c.prefix + "\""), std::string::npos) << m;
    EXPECT_NE(m.find("etcdctl role grant-permission --prefix"), std::string::npos) << m;
    EXPECT_EQ(m.find(kAppPassword), std::string::npos) << m;
    EXPECT_EQ(m.find(kNobodyPassword), std::string::npos) << m;
  }
}

TEST_F(EtcdTlsTest, ClientCertificateWithACommonNameIsRefusedOnceAuthIsOnSayingSo) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  auto client = LockClient::Open(Base(etcd, std::string("app:") + kAppPassword + "@") +
                                 Query("client") + "&prefix=app/");
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(client.status().IsInvalidArgument()) << client.status().ToString();
  EXPECT_NE(client.status().message().find("CommonName"), std::string::npos)
      << client.status().message();
  EXPECT_EQ(client.status().message().find(kAppPassword), std::string::npos);
}

TEST_F(EtcdTlsTest, FencectlNeverPrintsThePassword) {
  EtcdCluster etcd(TlsOptions());
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  std::string uri = Base(etcd, std::string("app:") + kAppPassword + "@") + AuthQuery();
  CommandResult ok = testing::RunCommand(
      {testing::FencectlBinary(), "acquire", "--locks", uri, "--ttl", "5s", "job"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"locks\":\"etcds://app:***@127.0.0.1:"), std::string::npos) << ok.out;
  const std::string wrong = "Wrong-pw-4711";
  CommandResult refused =
      testing::RunCommand({testing::FencectlBinary(), "acquire", "--locks",
                           Base(etcd, "app:" + wrong + "@") + AuthQuery(), "job"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("refused user \"app\""), std::string::npos) << refused.err;
  for (const std::string& text : {ok.out, ok.err, refused.out, refused.err}) {
    EXPECT_EQ(text.find(kAppPassword), std::string::npos) << text;
    EXPECT_EQ(text.find(wrong), std::string::npos) << text;
  }
}

TEST_F(EtcdTlsTest, ExpiredAuthTokenIsRenewedByTheHolderAndByAWaiterInLine) {
  procutil::EtcdOptions options = TlsOptions();
  options.auth_token_ttl = 1s;
  EtcdCluster etcd(options);
  ASSERT_FALSE(HasFailure()) << "etcd did not start";
  EnableAuth(etcd);
  std::string uri = Base(etcd, std::string("app:") + kAppPassword + "@") + AuthQuery();
  auto a = Open(uri);
  auto b = Open(uri);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto held = a->TryAcquire("job", 30s);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto waiter = std::async(std::launch::async, [&] { return b->Acquire("job", 30s, 30s); });
  ASSERT_TRUE(WaitFor([&] { return LastIssued(*a, "job") > held->token.value(); }));
  // etcd drops a token unused for its TTL (1s here), checking once a second, on its own clock,
  // which a test cannot advance: both clients' tokens are gone after 3s without calls (the
  // waiter makes none: its watch is open and its lease needs a keep-alive only every 10s).
  std::this_thread::sleep_for(3s);
  Status renewed = a->Extend(*held);
  EXPECT_TRUE(renewed.ok()) << renewed.ToString();
  Status released = a->Release(*held);
  ASSERT_TRUE(released.ok()) << released.ToString();
  auto granted = waiter.get();
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  EXPECT_GT(granted->token, held->token);
  EXPECT_TRUE(b->Release(*granted).ok());
}

}  // namespace
}  // namespace fencekit
