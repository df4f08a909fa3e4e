// fenced --auth: who may do what (bearer tokens, prefix rights, admin-only routes), fence
// administration, a malformed auth file, and the refusal to listen openly without auth. Against
// the real server on loopback, the real fenced binary, the store client and fencectl.
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

class HttpAuthTest : public testing::ServerFixture {
 protected:
  void SetUp() override {
    auth_file_ = WriteFile(dir_, "auth.json", AuthJson());
    StartServer({.auth_file = auth_file_});
  }
  RawResponse As(const std::string& token, std::string_view method, std::string_view target,
                 std::vector<std::pair<std::string, std::string>> headers = {},
                 std::string_view body = {}) {
    headers.push_back(Bearer(token));
    return Call(method, target, headers, body);
  }
  std::string auth_file_;
};

TEST_F(HttpAuthTest, MissingTokenIs401WithAChallenge) {
  for (const char* target : {"/v1/objects/billing/x", "/v1/fences/billing/x", "/v1/history",
                             "/metrics", "/no/such/route"}) {
    RawResponse r = Call("GET", target);
    EXPECT_EQ(r.status, 401) << target;
    EXPECT_EQ(ErrorName(r), "unauthorized") << target;
    EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"fenced\"") << target;
  }
  RawResponse put = PutWithToken("billing/x", "1");
  EXPECT_EQ(put.status, 401);
  // Another scheme is no bearer token at all.
  RawResponse basic = Call("GET", "/v1/objects/billing/x", {{"Authorization", "Basic YTpi"}});
  EXPECT_EQ(basic.status, 401);
  EXPECT_EQ(basic.header("www-authenticate"), "Bearer realm=\"fenced\"");
  // Nothing was written by the refused PUT.
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/billing/x").status, 404);
}

TEST_F(HttpAuthTest, UnknownOrMalformedTokenIs401InvalidTokenAndNeverEchoed) {
  const std::string unknown = "not-a-known-token-31337";
  RawResponse r = As(unknown, "GET", "/v1/objects/billing/x");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(ErrorName(r), "unauthorized");
  EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"fenced\", error=\"invalid_token\"");
  EXPECT_EQ(r.body.find(unknown), std::string::npos) << r.body;
  for (std::string value :
       {"Bearer", "Bearer ", "Bearer a b", "Bearer \"quoted\"", "Bearer =abc"}) {
    RawResponse m = Call("GET", "/v1/objects/billing/x", {{"Authorization", value}});
    EXPECT_EQ(m.status, 401) << value;
    EXPECT_EQ(m.header("www-authenticate"), "Bearer realm=\"fenced\", error=\"invalid_token\"")
        << value;
  }
  // A known token sent twice is not one credential.
  RawResponse twice =
      Call("GET", "/v1/objects/billing/x", {Bearer(kBillingToken), Bearer(kBillingToken)});
  EXPECT_EQ(twice.status, 401);
  // The scheme is case-insensitive.
  EXPECT_EQ(Call("GET", "/v1/objects/billing/x",
                 {{"Authorization", std::string("bEaReR ") + kBillingToken}})
                .status,
            404);
}

TEST_F(HttpAuthTest, HealthStaysOpen) {
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(As("unknown", "GET", "/healthz").status, 200);
}

TEST_F(HttpAuthTest, WritesNeedTheKeyAndTheLockInsideTheWritePrefixes) {
  RawResponse ok = As(kBillingToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(ok.status, 201) << ok.body;
  RawResponse under_lock = As(kBillingToken, "PUT", "/v1/objects/billing/b",
                              {{"Fencing-Token", "1"}, {"Fencing-Lock", "billing/lock"}}, "v");
  EXPECT_EQ(under_lock.status, 201) << under_lock.body;

  RawResponse key = As(kBillingToken, "PUT", "/v1/objects/other/a", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(key.status, 403);
  EXPECT_EQ(ErrorName(key), "forbidden");
  EXPECT_NE(key.body.find("billing"), std::string::npos) << key.body;
  RawResponse lock = As(kBillingToken, "PUT", "/v1/objects/billing/c",
                        {{"Fencing-Token", "1"}, {"Fencing-Lock", "other/lock"}}, "v");
  EXPECT_EQ(lock.status, 403);
  EXPECT_EQ(ErrorName(lock), "forbidden");
  RawResponse del = As(kBillingToken, "DELETE", "/v1/objects/other/a", {{"Fencing-Token", "1"}});
  EXPECT_EQ(del.status, 403);
  // Read rights are not write rights.
  RawResponse reader =
      As(kReaderToken, "PUT", "/v1/objects/shared/a", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(reader.status, 403);

  // The refused writes changed nothing: no object, no fence.
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/billing/c").status, 404);
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/shared/a").status, 404);
  RawResponse fence = As(kOpsToken, "GET", "/v1/fences/other/lock");
  EXPECT_NE(fence.body.find("\"highest\":0"), std::string::npos) << fence.body;
}

TEST_F(HttpAuthTest, ReadsNeedTheKeyInsideTheReadPrefixes) {
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/shared/a", {{"Fencing-Token", "1"}}, "v").status,
            201);
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "1"}}, "v").status,
            201);
  EXPECT_EQ(As(kReaderToken, "GET", "/v1/objects/shared/a").status, 200);
  EXPECT_EQ(As(kReaderToken, "GET", "/v1/fences/shared/a").status, 200);
  EXPECT_EQ(As(kBillingToken, "GET", "/v1/objects/billing/a").status, 200);

  RawResponse other = As(kReaderToken, "GET", "/v1/objects/billing/a");
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(ErrorName(other), "forbidden");
  EXPECT_EQ(other.body.find("\"v\""), std::string::npos);
  EXPECT_EQ(As(kBillingToken, "GET", "/v1/objects/shared/a").status, 403);
  EXPECT_EQ(As(kReaderToken, "GET", "/v1/fences/billing/a").status, 403);
}

TEST_F(HttpAuthTest, ListingNeedsReadRightsOnTheWholePrefix) {
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "1"}}, "v").status,
            201);
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/shared/a", {{"Fencing-Token", "1"}}, "v").status,
            201);
  RawResponse own = As(kBillingToken, "GET", "/v1/objects?prefix=billing%2F");
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_NE(own.body.find("billing/a"), std::string::npos);
  EXPECT_EQ(As(kBillingToken, "GET", "/v1/objects?prefix=billing%2Fa").status, 200);
  // A prefix reaching past its rights: the whole store, a sibling, or a shorter prefix.
  for (const char* target :
       {"/v1/objects", "/v1/objects?prefix=shared%2F", "/v1/objects?prefix=billing"}) {
    RawResponse r = As(kBillingToken, "GET", target);
    EXPECT_EQ(r.status, 403) << target;
    EXPECT_EQ(ErrorName(r), "forbidden") << target;
    EXPECT_EQ(r.body.find("shared/a"), std::string::npos);
  }
  EXPECT_EQ(Call("GET", "/v1/objects").status, 401);
  RawResponse all = As(kOpsToken, "GET", "/v1/objects");
  EXPECT_EQ(all.status, 200);
  EXPECT_NE(all.body.find("shared/a"), std::string::npos);
}

TEST_F(HttpAuthTest, BatchesNeedEveryKeyAndTheLockInsideTheWritePrefixes) {
  auto batch = [](const std::string& lock, const std::string& second_key) {
    return R"({"lock":")" + lock +
           R"(","token":1,"writes":[{"op":"put","key":"billing/a",)"
           R"("value":"v"},{"op":"put","key":")" +
           second_key + R"(","value":"v"}]})";
  };
  RawResponse key = As(kBillingToken, "POST", "/v1/batch", {}, batch("billing/lock", "other/b"));
  EXPECT_EQ(key.status, 403);
  EXPECT_EQ(ErrorName(key), "forbidden");
  EXPECT_NE(key.body.find("other/b"), std::string::npos) << key.body;
  RawResponse lock = As(kBillingToken, "POST", "/v1/batch", {}, batch("other/lock", "billing/b"));
  EXPECT_EQ(lock.status, 403);
  EXPECT_EQ(As(kReaderToken, "POST", "/v1/batch", {}, batch("shared/l", "shared/b")).status, 403);
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/billing/a").status, 404);
  EXPECT_NE(As(kOpsToken, "GET", "/v1/fences/other/lock").body.find("\"highest\":0"),
            std::string::npos);

  RawResponse ok = As(kBillingToken, "POST", "/v1/batch", {}, batch("billing/lock", "billing/b"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  RawResponse history = As(kOpsToken, "GET", "/v1/history");
  EXPECT_NE(history.body.find("\"principal\":\"billing\""), std::string::npos) << history.body;
}

TEST_F(HttpAuthTest, HistoryMetricsAndFenceAdministrationAreAdminOnly) {
  for (const char* token : {kBillingToken, kReaderToken}) {
    RawResponse history = As(token, "GET", "/v1/history");
    EXPECT_EQ(history.status, 403);
    EXPECT_EQ(ErrorName(history), "forbidden");
    EXPECT_EQ(As(token, "GET", "/metrics").status, 403);
    RawResponse set = As(token, "PUT", "/v1/fences/billing/a", {}, R"({"highest": 7})");
    EXPECT_EQ(set.status, 403);
    EXPECT_EQ(ErrorName(set), "forbidden");
  }
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/history").status, 200);
  EXPECT_EQ(Call("GET", "/v1/history").status, 401);
  RawResponse metrics = As(kOpsToken, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("fenced_writes_accepted_total"), std::string::npos);
  // Every refusal above is counted: 2 principals x 3 forbidden requests, 1 without a token.
  EXPECT_NE(metrics.body.find("\nfenced_requests_forbidden_total 6\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("\nfenced_requests_unauthorized_total 1\n"), std::string::npos);
  // The admin may write and read any key.
  EXPECT_EQ(As(kOpsToken, "PUT", "/v1/objects/anything", {{"Fencing-Token", "3"}}, "v").status,
            201);
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/anything").status, 200);
  // The refused fence administration changed nothing.
  RawResponse fence = As(kOpsToken, "GET", "/v1/fences/billing/a");
  EXPECT_NE(fence.body.find("\"highest\":0"), std::string::npos) << fence.body;
}

TEST_F(HttpAuthTest, FenceAdministrationRefusesABadBody) {
  for (std::string body :
       {"", "not json", "[1]", R"({})", R"({"highest": 0})", R"({"highest": -3})",
        R"({"highest": "5"})", R"({"highest": 1.5})", R"({"highest": 5, "unbind_service": "yes"})",
        R"({"highest": 5, "extra": 1})"}) {
    RawResponse r = As(kOpsToken, "PUT", "/v1/fences/billing/a", {}, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(ErrorName(r), "bad_body") << body;
  }
}

// Needs FencedStore::SetFence (the store's half of issue 16).
TEST_F(HttpAuthTest, AdminSetsAFenceAndItIsRecordedWithItsName) {
  ASSERT_EQ(As(kBillingToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "9"}}, "v").status,
            201);
  RawResponse set =
      As(kOpsToken, "PUT", "/v1/fences/billing/a", {}, R"({"highest": 4, "unbind_service": true})");
  ASSERT_EQ(set.status, 200) << set.body;
  auto decision = boost::json::parse(set.body).as_object();
  EXPECT_EQ(decision["op"], "set_fence");
  EXPECT_EQ(decision["highest"], 4);
  EXPECT_EQ(decision["principal"], "ops");
  RawResponse fence = As(kBillingToken, "GET", "/v1/fences/billing/a");
  EXPECT_NE(fence.body.find("\"highest\":4"), std::string::npos) << fence.body;
}

// A flood of long reads fills their queue; fence administration has its own.
TEST_F(HttpAuthTest, FenceAdministrationIsAnsweredWhileLongReadsAreRefused) {
  StartServer({.long_read_threads = 1, .max_queued_long_reads = 0, .auth_file = auth_file_});
  RawResponse listing = As(kOpsToken, "GET", "/v1/objects");
  ASSERT_EQ(listing.status, 503) << "the long-read queue takes nothing: " << listing.body;
  RawResponse set = As(kOpsToken, "PUT", "/v1/fences/billing/a", {}, R"({"highest": 4})");
  EXPECT_EQ(set.status, 200) << set.body;
  EXPECT_NE(As(kOpsToken, "GET", "/v1/fences/billing/a").body.find("\"highest\":4"),
            std::string::npos);
  EXPECT_EQ(As(kBillingToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "4"}}, "v").status,
            201);
}

// A key's lock is metadata of that lock: a principal that may read the key but not its lock
// learns nothing of the lock, in a read, a listing, a receipt or a refusal.
TEST_F(HttpAuthTest, ALockNameIsShownOnlyToPrincipalsThatMayReadTheLock) {
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/billing/k",
               {{"Fencing-Token", "1"}, {"Fencing-Lock", "secret/l"}}, "v")
                .status,
            201);
  RawResponse read = As(kBillingToken, "GET", "/v1/objects/billing/k");
  ASSERT_EQ(read.status, 200);
  EXPECT_EQ(read.headers.count("fencing-lock"), 0u) << read.header("fencing-lock");
  EXPECT_EQ(As(kOpsToken, "GET", "/v1/objects/billing/k").header("fencing-lock"), "secret/l");

  RawResponse listing = As(kBillingToken, "GET", "/v1/objects?prefix=billing%2F");
  ASSERT_EQ(listing.status, 200);
  auto entry = boost::json::parse(listing.body).at("objects").as_array().at(0).as_object();
  EXPECT_EQ(entry.at("key"), "billing/k");
  EXPECT_FALSE(entry.contains("lock")) << listing.body;
  EXPECT_NE(As(kOpsToken, "GET", "/v1/objects").body.find("secret/l"), std::string::npos);

  // A write under its own lock is refused as wrong_lock, without naming the bound lock.
  RawResponse wrong = As(kBillingToken, "PUT", "/v1/objects/billing/k",
                         {{"Fencing-Token", "5"}, {"Fencing-Lock", "billing/l"}}, "w");
  EXPECT_EQ(wrong.status, 409);
  EXPECT_EQ(ErrorName(wrong), "wrong_lock");
  EXPECT_EQ(wrong.body.find("secret"), std::string::npos) << wrong.body;
  RawResponse batch =
      As(kBillingToken, "POST", "/v1/batch", {},
         R"({"lock":"billing/l","token":5,"writes":[{"op":"put","key":"billing/k","value":"w"}]})");
  EXPECT_EQ(batch.status, 409);
  EXPECT_EQ(ErrorName(batch), "wrong_lock");
  EXPECT_EQ(batch.body.find("secret"), std::string::npos) << batch.body;
  // The admin is told.
  RawResponse told = As(kOpsToken, "PUT", "/v1/objects/billing/k",
                        {{"Fencing-Token", "5"}, {"Fencing-Lock", "billing/l"}}, "w");
  EXPECT_EQ(told.status, 409);
  EXPECT_NE(told.body.find("\"lock\":\"secret/l\""), std::string::npos) << told.body;

  // A receipt names the lock only to a principal that may read it.
  RawResponse own =
      As(kBillingToken, "PUT", "/v1/objects/billing/own", {{"Fencing-Token", "1"}}, "v");
  EXPECT_NE(own.body.find("\"lock\":\"billing/own\""), std::string::npos) << own.body;
  RawResponse blind = As(kScribeToken, "PUT", "/v1/objects/jobs/a",
                         {{"Fencing-Token", "1"}, {"Fencing-Lock", "jobs/l"}}, "v");
  ASSERT_EQ(blind.status, 201) << blind.body;
  EXPECT_EQ(blind.body.find("\"lock\""), std::string::npos) << blind.body;
  RawResponse blind_batch =
      As(kScribeToken, "POST", "/v1/batch", {},
         R"({"lock":"jobs/l","token":1,"writes":[{"op":"put","key":"jobs/b","value":"v"}]})");
  ASSERT_EQ(blind_batch.status, 200) << blind_batch.body;
  EXPECT_EQ(blind_batch.body.find("\"lock\""), std::string::npos) << blind_batch.body;
}

TEST_F(HttpAuthTest, StoreClientReadsAWrongLockWhoseLockIsNotNamed) {
  ASSERT_EQ(As(kOpsToken, "PUT", "/v1/objects/billing/k",
               {{"Fencing-Token", "1"}, {"Fencing-Lock", "secret/l"}}, "v")
                .status,
            201);
  auto client = StoreClient::Open("http://127.0.0.1:" + std::to_string(server_->port()),
                                  {.bearer_token = kBillingToken});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto r = (*client)->Put("billing/l", FencingToken::FromInt(5).value(), "billing/k", "w");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsWrongLock()) << r.status().ToString();
  EXPECT_EQ(BoundLock(r.status()).value_or("(none)"), "");
}

// Needs the store to record WriteRequest::principal (the store's half of issue 16).
TEST_F(HttpAuthTest, TheHistoryNamesWhoWrote) {
  ASSERT_EQ(As(kBillingToken, "PUT", "/v1/objects/billing/a", {{"Fencing-Token", "2"}}, "v").status,
            201);
  RawResponse history = As(kOpsToken, "GET", "/v1/history");
  ASSERT_EQ(history.status, 200);
  auto decisions = boost::json::parse(history.body).at("decisions").as_array();
  ASSERT_EQ(decisions.size(), 1u);
  const auto* principal = decisions[0].as_object().if_contains("principal");
  ASSERT_NE(principal, nullptr) << history.body;
  EXPECT_EQ(*principal, "billing");
}

TEST_F(HttpAuthTest, StoreClientSendsItsTokenAndReadsRefusals) {
  std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  auto billing = StoreClient::Open(url, {.bearer_token = kBillingToken});
  ASSERT_TRUE(billing.ok()) << billing.status().ToString();
  auto token = FencingToken::FromInt(5).value();
  auto put = (*billing)->Put("", token, "billing/k", "v");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = (*billing)->Get("billing/k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->value, "v");

  auto denied = (*billing)->Put("", token, "other/k", "v");
  EXPECT_TRUE(denied.status().IsPermissionDenied()) << denied.status().ToString();
  EXPECT_NE(denied.status().message().find("may not write"), std::string::npos)
      << denied.status().message();
  auto history = (*billing)->History(10);
  EXPECT_TRUE(history.status().IsPermissionDenied()) << history.status().ToString();
  auto set = (*billing)->SetFence("billing/k", token, false);
  EXPECT_TRUE(set.status().IsPermissionDenied()) << set.status().ToString();

  auto anonymous = StoreClient::Open(url);
  ASSERT_TRUE(anonymous.ok());
  auto refused = (*anonymous)->Get("billing/k");
  EXPECT_TRUE(refused.status().IsUnauthenticated()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("bearer token"), std::string::npos);

  // A token that could split the header is refused before any I/O.
  auto bad = StoreClient::Open(url, {.bearer_token = "abc\r\nX-Evil: 1"});
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status().ToString();
  EXPECT_EQ(bad.status().message().find("X-Evil"), std::string::npos);
}

TEST_F(HttpAuthTest, FencectlTakesATokenFileOrTheEnvironment) {
  std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  std::string token_file = WriteFile(dir_, "billing.token", std::string(kBillingToken) + "\n");
  auto ctl = [&](std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), testing::FencectlBinary());
    return RunCommand(args, env);
  };
  CommandResult put = ctl({"put", "--store", url, "--token-file", token_file, "--lock", "billing/k",
                           "--token", "3", "billing/k", "value"});
  EXPECT_EQ(put.exit_code, 0) << put.err;
  CommandResult get = ctl({"get", "--store", url, "billing/k"},
                          {std::string("FENCEKIT_STORE_TOKEN=") + kBillingToken});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("\"value\":\"value\""), std::string::npos) << get.out;
  CommandResult none = ctl({"get", "--store", url, "billing/k"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("bearer token"), std::string::npos) << none.err;
  CommandResult history = ctl({"history", "--store", url, "--token-file", token_file});
  EXPECT_EQ(history.exit_code, 1);
  EXPECT_NE(history.err.find("admin only"), std::string::npos) << history.err;
  CommandResult admin_history =
      ctl({"history", "--store", url}, {std::string("FENCEKIT_STORE_TOKEN=") + kOpsToken});
  EXPECT_EQ(admin_history.exit_code, 0) << admin_history.err;
  EXPECT_NE(admin_history.out.find("\"key\":\"billing/k\""), std::string::npos);
  CommandResult fence = ctl({"fence", "--store", url, "--token-file", token_file, "billing/k"});
  EXPECT_EQ(fence.exit_code, 0) << fence.err;
  EXPECT_NE(fence.out.find("\"highest\":3"), std::string::npos) << fence.out;
  CommandResult set =
      ctl({"fence", "--store", url, "--token-file", token_file, "--set", "9", "billing/k"});
  EXPECT_EQ(set.exit_code, 1);
  EXPECT_NE(set.err.find("admin only"), std::string::npos) << set.err;
  CommandResult missing = ctl({"get", "--store", url, "--token-file", dir_.File("absent"), "k"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--token-file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace fencekit
