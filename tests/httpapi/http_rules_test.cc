// The store's rules over HTTP, against the real server on loopback: wrong_lock with the bound
// lock, lock_for, Fencing-Service (wrong_service, bad_service, service_required), the fence's
// service, reasons in the history, and their metrics.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "support/server_fixture.h"

namespace fencekit {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

class HttpRulesTest : public testing::ServerFixture {
 protected:
  testing::RawResponse Put(const std::string& key, const std::string& token, Headers more = {}) {
    more.emplace_back("Fencing-Token", token);
    return Call("PUT", "/v1/objects/" + key, more, "v");
  }
  boost::json::object Json(const testing::RawResponse& r) {
    return boost::json::parse(r.body).as_object();
  }
  std::string Metrics() { return Call("GET", "/metrics").body; }
};

TEST_F(HttpRulesTest, WrongLockNamesTheBoundLockAndChangesNothing) {
  ASSERT_EQ(Put("k", "5", {{"Fencing-Lock", "owner lock"}}).status, 201);
  for (const auto& r : {Put("k", "9"), Put("k", "9", {{"Fencing-Lock", "other"}}),
                        Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "9"}})}) {
    EXPECT_EQ(r.status, 409) << r.body;
    auto o = Json(r);
    EXPECT_EQ(o.at("error").as_string(), "wrong_lock");
    EXPECT_EQ(o.at("lock").as_string(), "owner lock");
    EXPECT_NE(o.at("message").as_string().find("owner lock"), std::string::npos);
  }
  EXPECT_EQ(Json(Call("GET", "/v1/fences/k")).at("highest").as_int64(), 0);
  EXPECT_EQ(Json(Call("GET", "/v1/fences/other")).at("highest").as_int64(), 0);
  EXPECT_EQ(Call("GET", "/v1/objects/k").header("object-version"), "1");
  EXPECT_NE(Metrics().find("fenced_writes_refused_total{reason=\"wrong_lock\"} 3\n"),
            std::string::npos);
  auto history = Json(Call("GET", "/v1/history")).at("decisions").as_array();
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[3].as_object().at("reason").as_string(), "wrong_lock");
  EXPECT_FALSE(history[0].as_object().contains("reason"));
  // Deleted under its lock, the key is free for another lock.
  ASSERT_EQ(
      Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "5"}, {"Fencing-Lock", "owner lock"}})
          .status,
      200);
  EXPECT_EQ(Put("k", "1").status, 201);
}

TEST_F(HttpRulesTest, WrongLockEncodesABoundLockThatIsNotUtf8) {
  ASSERT_EQ(Put("k", "1", {{"Fencing-Lock", "l\xFF"}}).status, 201);
  auto r = Put("k", "1");
  ASSERT_EQ(r.status, 409);
  auto o = Json(r);
  EXPECT_EQ(o.at("lock").as_string(), "l%FF");
  EXPECT_EQ(o.at("lock_encoding").as_string(), "percent");
}

TEST_F(HttpRulesTest, LockForBindsKeysBeforeAnyWrite) {
  StartServer({}, {.lock_for = {{"orders/", "orders"}}});
  auto r = Put("orders%2F1", "1");
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Json(r).at("lock").as_string(), "orders");
  EXPECT_EQ(Put("orders%2F1", "1", {{"Fencing-Lock", "orders"}}).status, 201);
}

TEST_F(HttpRulesTest, FenceIsBoundToTheServiceOfItsFirstToken) {
  ASSERT_EQ(Put("k", "5", {{"Fencing-Service", "redis:0a1b"}}).status, 201);
  auto fence = Json(Call("GET", "/v1/fences/k"));
  EXPECT_EQ(fence.at("highest").as_int64(), 5);
  EXPECT_EQ(fence.at("service").as_string(), "redis:0a1b");
  auto r = Put("k", "99", {{"Fencing-Service", "etcd:77"}});
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Json(r).at("error").as_string(), "wrong_service");
  EXPECT_EQ(Json(Call("GET", "/v1/fences/k")).at("highest").as_int64(), 5);
  EXPECT_EQ(Put("k", "6").status, 200);  // no service: judged by its token
  EXPECT_NE(Metrics().find("fenced_writes_refused_total{reason=\"wrong_service\"} 1\n"),
            std::string::npos);
  auto history = Json(Call("GET", "/v1/history")).at("decisions").as_array();
  EXPECT_EQ(history[1].as_object().at("reason").as_string(), "wrong_service");
}

TEST_F(HttpRulesTest, UnboundFenceShowsNoService) {
  ASSERT_EQ(Put("k", "5").status, 201);
  EXPECT_FALSE(Json(Call("GET", "/v1/fences/k")).contains("service"));
}

TEST_F(HttpRulesTest, MalformedOrRepeatedServiceIsRefusedAndNotEchoed) {
  for (const auto& bad : {std::string("a b"), std::string(129, 's'), std::string("caf\xC3\xA9")}) {
    auto r = Put("k", "1", {{"Fencing-Service", bad}});
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(Json(r).at("error").as_string(), "bad_service");
    EXPECT_EQ(r.body.find(bad), std::string::npos);
  }
  auto twice = Put("k", "1", {{"Fencing-Service", "redis:a"}, {"Fencing-Service", "redis:b"}});
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(Json(twice).at("error").as_string(), "bad_service");
  EXPECT_EQ(Json(Call("GET", "/v1/fences/k")).at("highest").as_int64(), 0);
  EXPECT_NE(Metrics().find("fenced_writes_refused_total{reason=\"bad_service\"} 4\n"),
            std::string::npos);
}

TEST_F(HttpRulesTest, RequireServiceRefusesWritesWithoutOne) {
  StartServer({}, {.require_service = true});
  auto r = Put("k", "1");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json(r).at("error").as_string(), "service_required");
  EXPECT_NE(Json(r).at("message").as_string().find("Fencing-Service"), std::string::npos);
  EXPECT_EQ(Json(Call("GET", "/v1/fences/k")).at("highest").as_int64(), 0);
  EXPECT_EQ(Put("k", "1", {{"Fencing-Service", "sqlite:ab"}}).status, 201);
  EXPECT_NE(Metrics().find("fenced_writes_refused_total{reason=\"service_required\"} 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace fencekit
