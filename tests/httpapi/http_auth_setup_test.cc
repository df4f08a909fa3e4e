// fenced --auth, continued: without --auth, a malformed auth file, and the refusal to listen
// openly without auth. Against the real server on loopback and the real fenced binary.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <fstream>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/procutil/child_process.h"
#include "support/server_fixture.h"
#include "support/test_support.h"
#include "httpapi/auth_fixture.h"

namespace fencekit {
namespace {

using testing::CommandResult;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::RunCommand;
using testing::TempDir;

using namespace authtest;

// --- Without --auth --------------------------------------------------------------------------

using HttpNoAuthTest = testing::ServerFixture;

TEST_F(HttpNoAuthTest, EverythingIsOpenButFenceAdministration) {
  EXPECT_EQ(PutWithToken("k", "1").status, 201);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 200);
  EXPECT_EQ(Call("GET", "/v1/history").status, 200);
  EXPECT_EQ(Call("GET", "/metrics").status, 200);
  RawResponse set = Call("PUT", "/v1/fences/k", {}, R"({"highest": 5})");
  EXPECT_EQ(set.status, 403);
  EXPECT_EQ(ErrorName(set), "forbidden");
  EXPECT_NE(set.body.find("--auth"), std::string::npos) << set.body;
  RawResponse fence = Call("GET", "/v1/fences/k");
  EXPECT_NE(fence.body.find("\"highest\":1"), std::string::npos) << fence.body;
}

// --- A malformed auth file -------------------------------------------------------------------

struct BadAuthFile {
  const char* label;
  std::string text;
  const char* says;  // a piece of the refusal's message
};

class AuthFileTest : public ::testing::TestWithParam<BadAuthFile> {};

const std::string kDigest(64, 'a');

INSTANTIATE_TEST_SUITE_P(
    Refusals, AuthFileTest,
    ::testing::Values(
        BadAuthFile{"BadJson", "{\"principals\": [", "not valid JSON"},
        BadAuthFile{"NotAnObject", "[]", "top level"},
        BadAuthFile{"UnknownTopLevelField", R"({"principals": [], "users": []})",
                    "unknown field \"users\""},
        BadAuthFile{"NoPrincipals", R"({"principals": []})", "empty"},
        BadAuthFile{"MissingName", R"({"principals": [{"token_sha256": ")" + kDigest + R"("}]})",
                    "has no \"name\""},
        BadAuthFile{"DuplicateName",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"("}, {"name": "a", "token_sha256": ")" + std::string(64, 'b') + R"("}]})",
                    "used twice"},
        BadAuthFile{"BadHex",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + std::string(63, 'a') +
                        R"(g"}]})",
                    "64 hex digits"},
        BadAuthFile{"ShortHex", R"({"principals": [{"name": "a", "token_sha256": "abc"}]})",
                    "64 hex digits"},
        BadAuthFile{"MissingDigest", R"({"principals": [{"name": "a"}]})",
                    "has no \"token_sha256\""},
        BadAuthFile{"DuplicateDigest",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"("}, {"name": "b", "token_sha256": ")" + kDigest + R"("}]})",
                    "same token_sha256"},
        BadAuthFile{"UnknownField",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"(", "rights": []}]})",
                    "unknown field \"rights\""},
        BadAuthFile{"AdminNotBool",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"(", "admin": "yes"}]})",
                    "\"admin\" must be true or false"},
        BadAuthFile{"ReadNotAList",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"(", "read": "billing/"}]})",
                    "\"read\" must be a list"},
        BadAuthFile{"PrefixNotAString",
                    R"({"principals": [{"name": "a", "token_sha256": ")" + kDigest +
                        R"(", "write": [1]}]})",
                    "only strings"},
        BadAuthFile{"NameWithNewline",
                    R"({"principals": [{"name": "a\nb", "token_sha256": ")" + kDigest + R"("}]})",
                    "\"name\" must be"}),
    [](const auto& info) { return std::string(info.param.label); });

TEST_P(AuthFileTest, ServerRefusesToStartNamingTheProblem) {
  TempDir dir;
  std::string path = WriteFile(dir, "auth.json", GetParam().text);
  auto store = FencedStore::Open({.path = dir.File("store.db")});
  ASSERT_TRUE(store.ok());
  auto server = Server::Start({.port = 0, .auth_file = path}, store->get());
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(server.status().IsInvalidArgument());
  EXPECT_NE(server.status().message().find(GetParam().says), std::string::npos)
      << server.status().message();
  EXPECT_NE(server.status().message().find(path), std::string::npos) << server.status().message();
}

CommandResult RunFenced(const TempDir& dir, std::vector<std::string> args) {
  // `timeout`: a fenced that starts by mistake fails the test instead of hanging it.
  std::vector<std::string> argv = {"timeout", "20", testing::FencedBinary(), "--db",
                                   dir.File("fenced.db")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

TEST(FencedAuthFlagTest, FencedExitsOnAMalformedOrMissingAuthFile) {
  TempDir dir;
  std::string path = WriteFile(dir, "auth.json", R"({"principals": [{"name": "a"}]})");
  CommandResult bad = RunFenced(dir, {"--listen", "127.0.0.1:0", "--auth", path});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("has no \"token_sha256\""), std::string::npos) << bad.err;
  CommandResult missing =
      RunFenced(dir, {"--listen", "127.0.0.1:0", "--auth", dir.File("absent.json")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot read the auth file"), std::string::npos) << missing.err;
}

// --- Listening openly ------------------------------------------------------------------------

TEST(OpenListenTest, ServerRefusesANonLoopbackAddressWithoutAuth) {
  TempDir dir;
  auto store = FencedStore::Open({.path = dir.File("store.db")});
  ASSERT_TRUE(store.ok());
  auto open = Server::Start({.host = "0.0.0.0", .port = 0, .threads = 1}, store->get());
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("without authentication"), std::string::npos)
      << open.status().message();
  EXPECT_NE(open.status().message().find("--insecure-no-auth"), std::string::npos);

  for (const char* loopback : {"127.0.0.1", "127.8.9.10", "localhost"}) {
    auto ok = Server::Start({.host = loopback, .port = 0, .threads = 1}, store->get());
    EXPECT_TRUE(ok.ok()) << loopback << ": " << ok.status().ToString();
  }
  auto insecure = Server::Start(
      {.host = "0.0.0.0", .port = 0, .threads = 1, .insecure_no_auth = true}, store->get());
  ASSERT_TRUE(insecure.ok()) << insecure.status().ToString();
  RawConnection c((*insecure)->port());
  c.Send(Request("GET", "/healthz"));
  EXPECT_EQ(c.Read().status, 200);

  std::string auth = WriteFile(dir, "auth.json", AuthJson());
  auto with_auth =
      Server::Start({.host = "0.0.0.0", .port = 0, .threads = 1, .auth_file = auth}, store->get());
  ASSERT_TRUE(with_auth.ok()) << with_auth.status().ToString();
  RawConnection d((*with_auth)->port());
  d.Send(Request("GET", "/v1/objects/k"));
  EXPECT_EQ(d.Read().status, 401);
}

TEST(OpenListenTest, FencedRefusesANonLoopbackAddressWithoutAuthOrTheInsecureFlag) {
  TempDir dir;
  CommandResult refused = RunFenced(dir, {"--listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("refusing to listen on 0.0.0.0 without authentication"),
            std::string::npos)
      << refused.err;

  // With --insecure-no-auth it starts (and warns); ready once it writes its port file.
  std::string port_file = dir.File("port");
  procutil::ChildProcess fenced;
  ASSERT_TRUE(
      fenced
          .Start({.argv = {testing::FencedBinary(), "--listen", "0.0.0.0:0", "--db",
                           dir.File("open.db"), "--port-file", port_file, "--insecure-no-auth"},
                  .output_path = dir.File("fenced.log")})
          .ok());
  unsigned port = 0;
  ASSERT_TRUE(testing::WaitFor([&] {
    std::ifstream in(port_file);
    return static_cast<bool>(in >> port) || fenced.Exited();
  }));
  ASSERT_GT(port, 0u) << fenced.OutputTail();
  RawConnection c(static_cast<std::uint16_t>(port));
  c.Send(Request("GET", "/healthz"));
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_NE(fenced.OutputTail().find("WARNING: --insecure-no-auth"), std::string::npos)
      << fenced.OutputTail();
}

}  // namespace
}  // namespace fencekit
