// Conditional writes (If-Match, If-None-Match, ETag), listing (GET /v1/objects) and atomic
// batches (POST /v1/batch) over HTTP: the real server on loopback, spoken to with raw bytes, on
// a SQLite file and on a PostgreSQL database.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "fencekit/common/text.h"
#include "support/server_fixture.h"

namespace fencekit {
namespace {

namespace json = boost::json;
using testing::RawResponse;

using HttpObjectsTest = testing::EngineServerFixture;
FENCEKIT_ON_EACH_ENGINE(HttpObjectsTest);
using HttpObjectsHostileTest = testing::ServerFixture;

// The body as a JSON object (empty when it is not one: the test's expectations then fail).
json::object Body(const RawResponse& r) {
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << r.body;
    return {};
  }
  return v.as_object();
}

std::string ErrorOf(const RawResponse& r) {
  json::object o = Body(r);
  return o.contains("error") ? std::string(o["error"].as_string()) : "(none) " + r.body;
}

// --- Conditional writes ---------------------------------------------------------------------

TEST_P(HttpObjectsTest, WrongIfMatchGets412AndChangesNothing) {
  auto put = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "5"}}, "one");
  ASSERT_EQ(put.status, 201);
  const std::string etag = put.header("etag");
  const std::int64_t version = Body(put)["version"].as_int64();
  EXPECT_EQ(etag, "\"" + std::to_string(version) + "\"");
  auto got = Call("GET", "/v1/objects/k");
  EXPECT_EQ(got.header("etag"), etag);
  RawResponse head;
  {
    testing::RawConnection c(server_->port());
    c.Send(testing::Request("HEAD", "/v1/objects/k"));
    head = c.ReadHeadAnswer();
  }
  EXPECT_EQ(head.header("etag"), etag);

  // A newer grant whose If-Match names another version: 412, and neither the value nor the
  // fence moves.
  const std::string wrong = "\"" + std::to_string(version + 7) + "\"";
  auto refused =
      Call("PUT", "/v1/objects/k", {{"Fencing-Token", "9"}, {"If-Match", wrong}}, "lost update");
  EXPECT_EQ(refused.status, 412);
  json::object o = Body(refused);
  EXPECT_EQ(o["error"], "precondition_failed");
  EXPECT_EQ(o["version"], version);
  EXPECT_EQ(o["key"], "k");
  EXPECT_EQ(Call("GET", "/v1/objects/k").body, "one");
  EXPECT_EQ(Call("GET", "/v1/fences/k").body, "{\"lock\":\"k\",\"highest\":5}\n");
  auto deleted = Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "9"}, {"If-Match", wrong}});
  EXPECT_EQ(deleted.status, 412);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 200);

  // The right one applies, and gives the next ETag.
  auto applied = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "5"}, {"If-Match", etag}}, "two");
  EXPECT_EQ(applied.status, 200);
  EXPECT_NE(applied.header("etag"), etag);
  EXPECT_EQ(Call("GET", "/v1/objects/k").header("etag"), applied.header("etag"));
  auto gone = Call("DELETE", "/v1/objects/k",
                   {{"Fencing-Token", "5"}, {"If-Match", applied.header("etag")}});
  EXPECT_EQ(gone.status, 200);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_P(HttpObjectsTest, IfNoneMatchStarCreatesOnlyOnce) {
  auto first = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"If-None-Match", "*"}}, "a");
  EXPECT_EQ(first.status, 201);
  auto second = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"If-None-Match", "*"}}, "b");
  EXPECT_EQ(second.status, 412);
  EXPECT_EQ(Body(second)["version"], Body(first)["version"]);
  EXPECT_EQ(Call("GET", "/v1/objects/k").body, "a");
  EXPECT_EQ(Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"If-Match", "1"}}, "c").status,
            400);
  auto metrics = Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("fenced_writes_refused_total{reason=\"precondition_failed\"} 1\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("fenced_writes_refused_total{reason=\"bad_precondition\"} 1\n"),
            std::string::npos);
}

TEST_F(HttpObjectsHostileTest, MalformedPreconditionsGet400AndStoreNothing) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> bad = {
      {{"If-Match", "1"}},
      {{"If-Match", "W/\"1\""}},
      {{"If-Match", "\"1\", \"2\""}},
      {{"If-Match", "*"}},
      {{"If-Match", "\"0\""}},
      {{"If-Match", "\"01\""}},
      {{"If-Match", "\"\""}},
      {{"If-Match", "\"99999999999999999999\""}},
      {{"If-None-Match", "\"1\""}},
      {{"If-Match", "\"1\""}, {"If-Match", "\"1\""}},
      {{"If-Match", "\"1\""}, {"If-None-Match", "*"}},
  };
  for (auto headers : bad) {
    const std::string shown = headers.front().first + ": " + headers.front().second;
    headers.emplace_back("Fencing-Token", "1");
    auto r = Call("PUT", "/v1/objects/k", headers, "v");
    EXPECT_EQ(r.status, 400) << shown;
    EXPECT_EQ(ErrorOf(r), "bad_precondition") << shown;
    EXPECT_NE(r.body.find("If-Match: \\\"N\\\""), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
  EXPECT_EQ(Call("GET", "/v1/fences/k").body, "{\"lock\":\"k\",\"highest\":0}\n");
}

// --- Listing --------------------------------------------------------------------------------

TEST_P(HttpObjectsTest, ListingPagesThroughAPrefix) {
  const std::vector<std::string> paths = {"a", "a/1", "a/2", "a/%2B", "a/%C3%A9", "a/%FF", "b"};
  for (const auto& p : paths) {
    ASSERT_EQ(Call("PUT", "/v1/objects/" + p, {{"Fencing-Token", "3"}, {"Fencing-Lock", "L"}}, "v")
                  .status,
              201)
        << p;
  }
  std::vector<std::string> keys;
  std::string target = "/v1/objects?prefix=a%2F&limit=2";
  for (int pages = 0; pages < 10; ++pages) {
    auto r = Call("GET", target);
    ASSERT_EQ(r.status, 200) << r.body;
    json::object o = Body(r);
    const json::array& objects = o["objects"].as_array();
    EXPECT_LE(objects.size(), 2u);
    for (const auto& item : objects) {
      const json::object& i = item.as_object();
      EXPECT_EQ(i.at("lock"), "L");
      EXPECT_EQ(i.at("token"), 3);
      EXPECT_GE(i.at("version").as_int64(), 1);
      std::string key(i.at("key").as_string());
      if (i.contains("key_encoding")) key = "%:" + key;
      keys.push_back(key);
    }
    if (!o.contains("next")) break;
    // The cursor travels percent-encoded, whatever bytes it holds.
    std::string next(o["next"].as_string());
    if (o.contains("next_encoding")) {
      EXPECT_EQ(o["next_encoding"], "percent");
      target = "/v1/objects?prefix=a%2F&limit=2&after=" + next;
    } else {
      target = "/v1/objects?prefix=a%2F&limit=2&after=" + PercentEncode(next);
    }
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a/+", "a/1", "a/2", "a/\xc3\xa9", "%:a%2F%FF"}));
  auto all = Body(Call("GET", "/v1/objects"));
  EXPECT_EQ(all["objects"].as_array().size(), paths.size());
  EXPECT_FALSE(all.contains("next"));
}

TEST_F(HttpObjectsHostileTest, BadListingsGet400) {
  struct Case {
    std::string target;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"/v1/objects?limit=0", "bad_limit"},
      {"/v1/objects?limit=1001", "bad_limit"},
      {"/v1/objects?limit=ten", "bad_limit"},
      {"/v1/objects?limit=-1", "bad_limit"},
      {"/v1/objects?limit=1&limit=2", "bad_target"},
      {"/v1/objects?prefix=a&prefix=b", "bad_target"},
      {"/v1/objects?prefx=a", "bad_target"},
      {"/v1/objects?prefix=%ZZ", "bad_target"},
      {"/v1/objects?prefix=" + std::string(1025, 'k'), "bad_key"},
      {"/v1/objects?after=" + std::string(1025, 'k'), "bad_key"},
  };
  for (const auto& c : cases) {
    auto r = Call("GET", c.target);
    EXPECT_EQ(r.status, 400) << c.target;
    EXPECT_EQ(ErrorOf(r), c.error) << c.target;
  }
  auto post = Call("POST", "/v1/objects", {}, "x");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET");
  EXPECT_EQ(Call("GET", "/v1/objects?limit=1000").status, 200);
}

// --- Batches --------------------------------------------------------------------------------

TEST_P(HttpObjectsTest, BatchAppliesAllWrites) {
  ASSERT_EQ(
      Call("PUT", "/v1/objects/old", {{"Fencing-Token", "2"}, {"Fencing-Lock", "job"}}, "x").status,
      201);
  std::string body = R"({"lock": "job", "token": 3, "writes": [
      {"op": "put", "key": "a", "value": "caf\u00e9"},
      {"op": "put", "key": "b", "value_base64": "AP8="},
      {"op": "put", "key": "c", "value": "new", "if_absent": true},
      {"op": "delete", "key": "old"}]})";
  auto r = Call("POST", "/v1/batch", {{"Content-Type", "application/json"}}, body);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object o = Body(r);
  EXPECT_EQ(o["lock"], "job");
  EXPECT_EQ(o["token"], 3);
  const json::array& writes = o["writes"].as_array();
  ASSERT_EQ(writes.size(), 4u);
  EXPECT_EQ(writes[0].as_object().at("key"), "a");
  EXPECT_EQ(writes[0].as_object().at("created"), true);
  EXPECT_EQ(writes[3].as_object().at("deleted"), true);
  EXPECT_EQ(Call("GET", "/v1/objects/a").body, "caf\xc3\xa9");
  EXPECT_EQ(Call("GET", "/v1/objects/b").body, std::string("\0\xff", 2));
  EXPECT_EQ(Call("GET", "/v1/objects/c").header("fencing-lock"), "job");
  EXPECT_EQ(Call("GET", "/v1/objects/c").header("etag"),
            "\"" + std::to_string(writes[2].as_object().at("version").as_int64()) + "\"");
  EXPECT_EQ(Call("GET", "/v1/objects/old").status, 404);
  // A batch counts as its writes.
  EXPECT_NE(Call("GET", "/metrics").body.find("\nfenced_writes_accepted_total 5\n"),
            std::string::npos);
  // The token may come as a string too (JSON numbers past 2^53 lose digits in some decoders).
  auto again = Call("POST", "/v1/batch", {},
                    R"({"lock":"job","token":"3","writes":[{"op":"put","key":"a","value":"2"}]})");
  EXPECT_EQ(again.status, 200) << again.body;
}

TEST_P(HttpObjectsTest, StaleBatchGets409AndWritesNone) {
  ASSERT_EQ(Call("PUT", "/v1/objects/a", {{"Fencing-Token", "7"}, {"Fencing-Lock", "job"}}, "kept")
                .status,
            201);
  auto r = Call("POST", "/v1/batch", {},
                R"({"lock":"job","token":6,"writes":[{"op":"put","key":"a","value":"x"},)"
                R"({"op":"put","key":"b","value":"x"},{"op":"delete","key":"a"}]})");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.header("fencing-highest"), "7");
  json::object o = Body(r);
  EXPECT_EQ(o["error"], "stale_token");
  EXPECT_EQ(o["highest"], 7);
  EXPECT_EQ(Call("GET", "/v1/objects/a").body, "kept");
  EXPECT_EQ(Call("GET", "/v1/objects/b").status, 404);
}

TEST_P(HttpObjectsTest, BatchWithAFailedPreconditionGets412NamingTheKey) {
  auto put = Call("PUT", "/v1/objects/c", {{"Fencing-Token", "1"}, {"Fencing-Lock", "job"}}, "v");
  ASSERT_EQ(put.status, 201);
  auto r = Call("POST", "/v1/batch", {},
                R"({"lock":"job","token":2,"writes":[{"op":"put","key":"a","value":"x"},)"
                R"({"op":"put","key":"c","value":"x","if_absent":true}]})");
  EXPECT_EQ(r.status, 412);
  json::object o = Body(r);
  EXPECT_EQ(o["error"], "precondition_failed");
  EXPECT_EQ(o["key"], "c");
  EXPECT_EQ(o["version"], Body(put)["version"]);
  EXPECT_NE(o["message"].as_string().find("write 1"), std::string::npos) << r.body;
  EXPECT_EQ(Call("GET", "/v1/objects/a").status, 404);
  EXPECT_EQ(Call("GET", "/v1/fences/job").body, "{\"lock\":\"job\",\"highest\":1}\n");
}

TEST_P(HttpObjectsTest, BatchOnAKeyOfAnotherLockGets409WrongLock) {
  ASSERT_EQ(Call("PUT", "/v1/objects/owned", {{"Fencing-Token", "1"}}, "v").status, 201);
  auto r = Call("POST", "/v1/batch", {},
                R"({"lock":"job","token":2,"writes":[{"op":"put","key":"a","value":"x"},)"
                R"({"op":"delete","key":"owned"}]})");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(ErrorOf(r), "wrong_lock");
  EXPECT_EQ(Body(r)["lock"], "owned");
  EXPECT_EQ(Call("GET", "/v1/objects/a").status, 404);
  EXPECT_EQ(Call("GET", "/v1/objects/owned").status, 200);
}

TEST_F(HttpObjectsHostileTest, MalformedBatchesGet400AndStoreNothing) {
  struct Case {
    std::string body;
    std::string error;
  };
  auto one = [](const std::string& write) {
    return R"({"lock":"job","token":1,"writes":[)" + write + "]}";
  };
  const std::vector<Case> cases = {
      {"", "bad_body"},
      {"[]", "bad_body"},
      {"{\"lock\":\"job\",\"token\":1,\"writes\":[", "bad_body"},
      {R"({"token":1,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","token":0,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","token":-3,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","token":1.5,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","token":"07","writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"job","token":18446744073709551615,"writes":[]})", "bad_body"},
      {R"({"lock":"job","token":1,"writes":{}})", "bad_body"},
      {R"({"lock":"job","token":1,"writes":[]})", "bad_body"},
      {R"({"lock":"job","token":1,"writes":[],"extra":1})", "bad_body"},
      {R"({"lock":7,"token":1,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_body"},
      {R"({"lock":"%zz","lock_encoding":"percent","token":1,"writes":[]})", "bad_body"},
      {one(R"({"op":"patch","key":"a","value":"v"})"), "bad_body"},
      {one(R"({"key":"a","value":"v"})"), "bad_body"},
      {one(R"({"op":"put","value":"v"})"), "bad_body"},
      {one(R"({"op":"put","key":"a"})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value":"v","value_base64":"dg=="})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value_base64":"not base64!"})"), "bad_body"},
      // Padded, as the docs say: "dg" is "v" without its "==".
      {one(R"({"op":"put","key":"a","value_base64":"dg"})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value_base64":"dg="})"), "bad_body"},
      {one(R"({"op":"delete","key":"a","value":"v"})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value":"v","if_version":0})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value":"v","if_version":"3"})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value":"v","if_version":3,"if_absent":true})"), "bad_body"},
      {one(R"({"op":"put","key":"a","value":"v","mode":"x"})"), "bad_body"},
      {one(R"("put a")"), "bad_body"},
      {one(R"({"op":"put","key":"","value":"v"})"), "bad_key"},
      {one(R"({"op":"put","key":"a\nb","value":"v"})"), "bad_key"},
      {one(R"({"op":"put","key":"a","value":"v"},{"op":"put","key":"\u0000","value":"v"})"),
       "bad_key"},
      {R"({"lock":"","token":1,"writes":[{"op":"put","key":"a","value":"v"}]})", "bad_lock"},
      {R"({"lock":"job","token":1,"service":"bad service!",)"
       R"("writes":[{"op":"put","key":"a","value":"v"}]})",
       "bad_service"},
      {std::string(100, '[') + std::string(100, ']'), "bad_body"},
  };
  for (const auto& c : cases) {
    auto r = Call("POST", "/v1/batch", {}, c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(ErrorOf(r), c.error) << c.body;
  }
  // More writes than a batch may have: 413, before any of them is looked at.
  std::string many = R"({"lock":"job","token":1,"writes":[)";
  for (int i = 0; i < 1001; ++i) many += std::string(i ? "," : "") + "{}";
  many += "]}";
  auto r = Call("POST", "/v1/batch", {}, many);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(ErrorOf(r), "batch_too_large");
  auto get = Call("GET", "/v1/batch");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.header("allow"), "POST");
  EXPECT_EQ(Call("POST", "/v1/batch?x=1", {}, "{}").status, 400);
  EXPECT_EQ(Call("GET", "/v1/objects/a").status, 404);
  EXPECT_EQ(Call("GET", "/v1/fences/job").body, "{\"lock\":\"job\",\"highest\":0}\n");
}

TEST_F(HttpObjectsHostileTest, BatchOverTheBodyLimitGets413) {
  StartServer({.max_body_bytes = 1024});
  std::string body = R"({"lock":"job","token":1,"writes":[{"op":"put","key":"a","value":")" +
                     std::string(2000, 'v') + "\"}]}";
  auto r = Call("POST", "/v1/batch", {}, body);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(ErrorOf(r), "body_too_large");
  EXPECT_EQ(Call("GET", "/v1/objects/a").status, 404);
}

TEST_F(HttpObjectsHostileTest, BatchOverTheStoresBoundsGets413) {
  StartServer({}, {.max_batch_bytes = 100});
  std::string body = R"({"lock":"job","token":1,"writes":[{"op":"put","key":"a","value":")" +
                     std::string(60, 'v') + R"("},{"op":"put","key":"b","value":")" +
                     std::string(60, 'v') + "\"}]}";
  auto r = Call("POST", "/v1/batch", {}, body);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(ErrorOf(r), "batch_too_large");
  EXPECT_NE(r.body.find("122 bytes"), std::string::npos) << r.body;
  EXPECT_EQ(Call("GET", "/v1/objects/a").status, 404);
}

TEST_F(HttpObjectsHostileTest, RequireServiceAppliesToBatches) {
  StartServer({}, {.require_service = true});
  auto r = Call("POST", "/v1/batch", {},
                R"({"lock":"job","token":1,"writes":[{"op":"put","key":"a","value":"v"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ErrorOf(r), "service_required");
  auto ok = Call("POST", "/v1/batch", {},
                 R"({"lock":"job","token":1,"service":"redis:0123","writes":[)"
                 R"({"op":"put","key":"a","value":"v"}]})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

}  // namespace
}  // namespace fencekit
