// fenced over HTTPS (--tls-cert/--tls-key): curl and the store client verify it with a CA made
// at test time by the openssl CLI; a plain request, a stalled handshake and a bad certificate or
// key are refused; the handshake counts against the connection limit and Stop() drains it.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/procutil/child_process.h"
#include "support/pki.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::CommandResult;
using testing::Pki;
using testing::RawConnection;
using testing::Request;
using testing::RunCommand;
using testing::TempDir;

class HttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override { Start({}); }

  void Start(ServerOptions options) {
    server_.reset();
    store_.reset();
    auto store = FencedStore::Open({.path = dir_.File("store.db")});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    options.port = 0;
    options.threads = 2;
    if (options.tls_cert_file.empty()) options.tls_cert_file = pki_->cert();
    if (options.tls_key_file.empty()) options.tls_key_file = pki_->key();
    auto server = Server::Start(options, store_.get());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  std::string Url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(server_->port());
  }
  CommandResult Curl(std::vector<std::string> args) {
    args.insert(args.begin(), {"curl", "-sS", "--noproxy", "*", "--max-time", "20"});
    return RunCommand(args);
  }

  static Pki* pki_;
  TempDir dir_;
  std::unique_ptr<FencedStore> store_;
  std::unique_ptr<Server> server_;
};
Pki* HttpTlsTest::pki_ = nullptr;

TEST_F(HttpTlsTest, CurlTrustingTheCaGetsAnswersAndWithoutItIsRefused) {
  CommandResult ok = Curl({"--cacert", pki_->ca(), Url() + "/healthz"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"status\":\"ok\""), std::string::npos) << ok.out;
  CommandResult by_name = Curl({"--cacert", pki_->ca(), "-X", "PUT", "-H", "Fencing-Token: 2",
                                "--data-binary", "v", Url("localhost") + "/v1/objects/k"});
  EXPECT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_NE(by_name.out.find("\"token\":2"), std::string::npos) << by_name.out;
  CommandResult untrusted = Curl({Url() + "/healthz"});
  EXPECT_EQ(untrusted.exit_code, 60) << untrusted.err;  // peer certificate cannot be verified
  // TLS 1.1 and older are not spoken.
  CommandResult old =
      Curl({"--cacert", pki_->ca(), "--tlsv1.1", "--tls-max", "1.1", Url() + "/healthz"});
  EXPECT_NE(old.exit_code, 0);
}

TEST_F(HttpTlsTest, StoreClientVerifiesTheServerWithTheCaFile) {
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto client = StoreClient::Open(Url(host), {.ca_file = pki_->ca()});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    auto put = (*client)->Put("", FencingToken::FromInt(3).value(), "k-" + host, "value");
    ASSERT_TRUE(put.ok()) << host << ": " << put.status().ToString();
    auto got = (*client)->Get("k-" + host);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->value, "value");
    // The keep-alive connection is reused for the next request.
    EXPECT_TRUE((*client)->Highest("k-" + host).ok());
  }
}

// Most TLS clients (fencekit's own included) close without a close_notify alert: that is a
// normal end of a connection, not a malformed request.
TEST_F(HttpTlsTest, TheEventStreamWorksOverTls) {
  procutil::ChildProcess curl;
  std::string out = dir_.File("events.txt");
  ASSERT_TRUE(curl.Start({.argv = {"curl", "-sN", "--cacert", pki_->ca(), "--max-time", "20",
                                   Url() + "/v1/events"},
                          .output_path = out})
                  .ok());
  auto client = StoreClient::Open(Url(), {.ca_file = pki_->ca()});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // Writes until one is decided after the stream opened and arrives on it.
  std::int64_t token = 0;
  auto seen = [&] {
    std::ifstream f(out);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return text.find("\"decision\":\"accepted\"") != std::string::npos;
  };
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        if (seen()) return true;
        EXPECT_TRUE((*client)->Put("k", *FencingToken::FromInt(++token), "k", "v").ok());
        return false;
      },
      std::chrono::seconds(15)));
  curl.Kill();
}

TEST_F(HttpTlsTest, AClientClosingWithoutCloseNotifyIsNotCountedAsMalformed) {
  {
    auto client = StoreClient::Open(Url(), {.ca_file = pki_->ca()});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ASSERT_TRUE((*client)->Put("", FencingToken::FromInt(3).value(), "k", "v").ok());
  }  // the connection is dropped here
  std::string metrics;
  ASSERT_TRUE(testing::WaitFor([&] {
    metrics = Curl({"--cacert", pki_->ca(), Url() + "/metrics"}).out;
    return metrics.find("\nfenced_connections_open 1\n") != std::string::npos;  // curl's own
  })) << metrics;
  EXPECT_EQ(metrics.find("reason=\"bad_request\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("reason=\"bad_request\"} 0"), std::string::npos) << metrics;
}

TEST_F(HttpTlsTest, StoreClientRefusesAnUntrustedOrMisnamedCertificate) {
  auto system_cas = StoreClient::Open(Url());  // the system's CAs do not know the test CA
  ASSERT_TRUE(system_cas.ok()) << system_cas.status().ToString();
  auto refused = (*system_cas)->Get("k");
  EXPECT_TRUE(refused.status().IsUnavailable()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("not trusted"), std::string::npos)
      << refused.status().message();

  Start({.tls_cert_file = pki_->cert("other"), .tls_key_file = pki_->key("other")});
  auto client = StoreClient::Open(Url(), {.ca_file = pki_->ca()});
  ASSERT_TRUE(client.ok());
  auto misnamed = (*client)->Get("k");
  EXPECT_TRUE(misnamed.status().IsUnavailable()) << misnamed.status().ToString();
  EXPECT_NE(misnamed.status().message().find("mismatch"), std::string::npos)
      << misnamed.status().message();

  auto no_ca_file = StoreClient::Open(Url(), {.ca_file = dir_.File("absent.pem")});
  EXPECT_TRUE(no_ca_file.status().IsInvalidArgument()) << no_ca_file.status().ToString();
}

TEST_F(HttpTlsTest, APlainRequestToTheTlsPortIsClosedUnanswered) {
  RawConnection c(server_->port());
  c.Send(Request("GET", "/healthz"));
  EXPECT_EQ(c.Read(std::chrono::seconds(10)).status, 0);  // no HTTP answer, closed
  // The server keeps serving.
  EXPECT_EQ(Curl({"--cacert", pki_->ca(), Url() + "/healthz"}).exit_code, 0);
}

TEST_F(HttpTlsTest, AStalledHandshakeIsCutAtTheReadTimeout) {
  Start({.read_timeout = std::chrono::milliseconds(200)});
  RawConnection c(server_->port());  // connects, never says hello
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.ClosedByPeer(std::chrono::seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// The handshake's deadline ends with the handshake: each later request has --read-timeout of
// its own, so a connection in use outlives the read timeout (curl spaces its requests; one
// connection for all of them, none cut and reopened).
TEST_F(HttpTlsTest, AConnectionInUseOutlivesTheReadTimeout) {
  Start({.read_timeout = std::chrono::milliseconds(1000)});
  std::vector<std::string> args = {"--cacert", pki_->ca(), "--rate",
                                   "2/s",      "-w",       "%{http_code}:%{num_connects} "};
  for (int i = 0; i < 5; ++i) {  // ~2 s of one connection
    args.insert(args.end(), {"-o", "/dev/null", Url() + "/healthz"});
  }
  CommandResult r = Curl(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "200:1 200:0 200:0 200:0 200:0 ") << r.err;
}

TEST_F(HttpTlsTest, AHandshakeCountsAgainstTheConnectionLimit) {
  Start({.max_connections = 1});
  auto first = std::make_unique<RawConnection>(server_->port());  // handshake pending
  RawConnection second(server_->port());
  EXPECT_TRUE(second.ClosedByPeer(std::chrono::seconds(10)));
  first.reset();  // frees the slot
  auto client = StoreClient::Open(Url(), {.ca_file = pki_->ca()});
  ASSERT_TRUE(client.ok());
  Status last;
  EXPECT_TRUE(testing::WaitFor([&] {
    auto got = (*client)->Get("absent");
    last = got.status();
    return got.status().IsNotFound();
  })) << last.ToString();
}

TEST_F(HttpTlsTest, StopClosesAHandshakingConnectionAndDrains) {
  RawConnection c(server_->port());
  auto client = StoreClient::Open(Url(), {.ca_file = pki_->ca()});
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Get("absent").status().IsNotFound());  // an idle TLS session too
  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  server_->Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));  // drain is 10 s
  EXPECT_TRUE(c.ClosedByPeer(std::chrono::seconds(5)));
}

TEST_F(HttpTlsTest, TlsAndAuthTogetherOverFencectl) {
  std::string auth = dir_.File("auth.json");
  CommandResult digest =
      RunCommand({"sh", "-c", "printf %s s3cret-token | sha256sum | cut -d' ' -f1"});
  ASSERT_EQ(digest.exit_code, 0);
  digest.out.pop_back();
  std::ofstream(auth) << R"({"principals": [{"name": "ops", "token_sha256": ")" << digest.out
                      << R"(", "admin": true}]})";
  Start({.auth_file = auth});
  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::FencectlBinary());
    return RunCommand(args,
                      {"FENCEKIT_STORE=" + Url("localhost"), "FENCEKIT_STORE_TOKEN=s3cret-token"});
  };
  CommandResult put =
      ctl({"put", "--ca-file", pki_->ca(), "--lock", "job", "--token", "4", "k", "v"});
  EXPECT_EQ(put.exit_code, 0) << put.err;
  CommandResult get = ctl({"get", "--ca-file", pki_->ca(), "k"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("\"value\":\"v\""), std::string::npos) << get.out;
  CommandResult untrusted = ctl({"get", "k"});
  EXPECT_EQ(untrusted.exit_code, 1);
  EXPECT_NE(untrusted.err.find("not trusted"), std::string::npos) << untrusted.err;
}

// --- A bad certificate or key ----------------------------------------------------------------

class TlsStartTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  Status StartWith(const std::string& cert, const std::string& key) {
    auto store = FencedStore::Open({.path = dir_.File("store.db")});
    if (!store.ok()) return store.status();
    auto server = Server::Start(
        {.port = 0, .threads = 1, .tls_cert_file = cert, .tls_key_file = key}, store->get());
    return server.status();
  }
  static Pki* pki_;
  TempDir dir_;
};
Pki* TlsStartTest::pki_ = nullptr;

TEST_F(TlsStartTest, AnUnreadableMalformedOrMismatchedPairRefusesToStart) {
  std::string garbage = dir_.File("garbage.pem");
  std::ofstream(garbage) << "not a certificate\n";
  struct Case {
    std::string cert, key;
    const char* says;
  } cases[] = {
      {dir_.File("absent.pem"), pki_->key(), "cannot read the TLS certificate"},
      {pki_->cert(), dir_.File("absent.key"), "cannot read the TLS key"},
      {garbage, pki_->key(), "is not a PEM certificate chain"},
      {pki_->cert(), garbage, "is not a PEM private key"},
      {pki_->cert(), pki_->key("other"), "does not belong to the certificate"},
      {pki_->cert(), "", "both --tls-cert and --tls-key"},
  };
  for (const auto& c : cases) {
    Status s = StartWith(c.cert, c.key);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.says << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
  EXPECT_TRUE(StartWith(pki_->cert(), pki_->key()).ok());
}

TEST_F(TlsStartTest, FencedExitsOnAMismatchedKey) {
  CommandResult r = RunCommand({"timeout", "20", testing::FencedBinary(), "--listen", "127.0.0.1:0",
                                "--db", dir_.File("fenced.db"), "--tls-cert", pki_->cert(),
                                "--tls-key", pki_->key("other")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not belong to the certificate"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fencekit
