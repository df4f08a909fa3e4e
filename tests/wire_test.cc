// The HTTP protocol's one definition (httpapi/src/wire.h), read back the way each end reads it.
#include "wire.h"

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <set>

namespace fencekit::wire {
namespace {

TEST(WireTest, EveryErrorRoundTripsToTheStatusTheClientDocuments) {
  std::set<std::string_view> names;
  for (const ErrorInfo& info : Errors()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_GE(info.http_status, 400u) << info.name;
    EXPECT_LT(info.http_status, 600u) << info.name;
    EXPECT_EQ(FindError(info.name), &info);
    boost::json::object body = ErrorObject(info.error, "why \"it\" failed");
    if (info.error == Error::kWrongLock) PutName(body, "lock", "bound\xFF");
    Status s = StatusFromReply(info.http_status, boost::json::serialize(body), "7",
                               "store refused a write");
    EXPECT_EQ(s.code(), info.client_code) << info.name << ": " << s.ToString();
    EXPECT_NE(s.message().find("store refused a write: why \"it\" failed"), std::string::npos)
        << s.message();
    if (info.client_code == StatusCode::kStaleToken) {
      EXPECT_EQ(s.highest_token(), 7);
    }
    if (info.client_code == StatusCode::kWrongLock) {
      EXPECT_EQ(s.bound_lock(), "bound\xFF");
    }
  }
  EXPECT_EQ(names.size(), Errors().size());
}

TEST(WireTest, UnknownErrorsAreJudgedByTheirStatusClass) {
  EXPECT_TRUE(StatusFromReply(404, "", "", "x").IsNotFound());
  EXPECT_TRUE(StatusFromReply(418, "{\"error\":\"teapot\"}", "", "x").IsInvalidArgument());
  EXPECT_TRUE(StatusFromReply(502, "<html>bad gateway</html>", "", "x").IsUnavailable());
  EXPECT_TRUE(StatusFromReply(409, "", "12", "x").IsStaleToken());
  // A stale-token answer without a usable fence is not trusted as one.
  EXPECT_TRUE(StatusFromReply(409, ErrorBody(Error::kStaleToken, "m"), "012", "x").IsUnavailable());
  EXPECT_TRUE(StatusFromReply(409, ErrorBody(Error::kStaleToken, "m"), "", "x").IsUnavailable());
  // So is a wrong-lock answer that does not name the bound lock.
  EXPECT_TRUE(StatusFromReply(409, ErrorBody(Error::kWrongLock, "m"), "", "x").IsUnavailable());
}

TEST(WireTest, StoreStatusesMapToTheirRefusals) {
  EXPECT_EQ(ErrorForStoreStatus(Status::StaleToken("m", 3)), Error::kStaleToken);
  EXPECT_EQ(ErrorForStoreStatus(Status::InvalidArgument("m")), Error::kBadKey);
  EXPECT_EQ(ErrorForStoreStatus(Status::InvalidArgument("m"), Error::kBadLock), Error::kBadLock);
  EXPECT_EQ(ErrorForStoreStatus(Status::NotFound("m")), Error::kNotFound);
  EXPECT_EQ(ErrorForStoreStatus(Status::IoError("disk full")), Error::kStorageError);
  EXPECT_EQ(ErrorForStoreStatus(Status::WrongLock("m", "a")), Error::kWrongLock);
  EXPECT_EQ(ErrorForStoreStatus(Status::WrongService("m")), Error::kWrongService);
  EXPECT_EQ(ErrorForStoreStatus(Status::UnverifiedToken("m")), Error::kUnverifiedToken);
  EXPECT_EQ(ErrorForStoreStatus(Status::PermissionDenied("m")), Error::kForbidden);
  EXPECT_EQ(ErrorForStoreStatus(Status::Timeout("lock service")), Error::kVerifyUnavailable);
  EXPECT_EQ(ErrorForStoreStatus(Status::Unavailable("closed")), Error::kStorageError);
}

TEST(WireTest, NamesRoundTripThroughHeadersForEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  std::string header = NameToHeader(all);
  for (char c : header) {
    EXPECT_TRUE(c > 0x20 && c < 0x7F) << "byte " << int(c) << " in a header value";
  }
  EXPECT_EQ(NameFromHeader(header), all);
  EXPECT_EQ(NameToHeader("reports/q3.pdf"), "reports/q3.pdf");
  EXPECT_EQ(NameFromHeader("bad%zz"), std::nullopt);
}

TEST(WireTest, NamesRoundTripThroughJson) {
  for (std::string name : {std::string("plain"), std::string("r\xC3\xA9sum\xC3\xA9"),
                           std::string("\xFF\xFE not utf-8"), std::string("%41 is not A")}) {
    boost::json::object o;
    PutName(o, "key", name);
    EXPECT_EQ(GetName(o, "key"), name);
  }
  boost::json::object bad{{"key", "%zz"}, {"key_encoding", "percent"}};
  EXPECT_EQ(GetName(bad, "key"), std::nullopt);
  boost::json::object unknown{{"key", "x"}, {"key_encoding", "base64"}};
  EXPECT_EQ(GetName(unknown, "key"), std::nullopt);
}

TEST(WireTest, DecisionsRoundTripThroughJson) {
  Decision d;
  d.seq = 42;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1795000000123));
  d.op = "delete";
  d.lock = "\xFF lock";
  d.token = 9;
  d.key = "k/\xC3\xA9";
  d.accepted = false;
  d.highest = 11;
  d.reason = "unverified_token";
  d.principal = "ops\xFF";
  auto json = DecisionToJson(d);
  EXPECT_EQ(json.at("reason").as_string(), "unverified_token");
  auto back = DecisionFromJson(boost::json::value(json));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, d.seq);
  EXPECT_EQ(back->time, d.time);
  EXPECT_EQ(back->op, d.op);
  EXPECT_EQ(back->lock, d.lock);
  EXPECT_EQ(back->token, d.token);
  EXPECT_EQ(back->key, d.key);
  EXPECT_EQ(back->accepted, d.accepted);
  EXPECT_EQ(back->highest, d.highest);
  EXPECT_EQ(back->reason, d.reason);
  EXPECT_EQ(back->principal, d.principal);
  auto partial = DecisionToJson(d);
  partial.erase("highest");
  EXPECT_TRUE(DecisionFromJson(boost::json::value(partial)).status().IsUnavailable());
  auto bad_reason = DecisionToJson(d);
  bad_reason["reason"] = 3;
  EXPECT_TRUE(DecisionFromJson(boost::json::value(bad_reason)).status().IsUnavailable());
}

TEST(WireTest, AcceptedDecisionsWithoutAPrincipalCarryNeitherField) {
  Decision d;
  d.op = "put";
  d.lock = "l";
  d.key = "k";
  d.accepted = true;
  auto json = DecisionToJson(d);
  EXPECT_FALSE(json.contains("reason"));
  EXPECT_FALSE(json.contains("principal"));
  auto back = DecisionFromJson(boost::json::value(json));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->reason, "");
  EXPECT_EQ(back->principal, "");
}

TEST(WireTest, ReceiptsSayWhetherADeleteDeletedAnything) {
  WriteReceipt r{"k", "l", FencingToken::FromInt(5).value(), 0, false};
  EXPECT_EQ(boost::json::serialize(ReceiptToJson(r, /*is_delete=*/true)),
            "{\"key\":\"k\",\"lock\":\"l\",\"token\":5,\"version\":0,\"deleted\":false}");
  r.version = 3;
  EXPECT_EQ(boost::json::serialize(ReceiptToJson(r, /*is_delete=*/false)),
            "{\"key\":\"k\",\"lock\":\"l\",\"token\":5,\"version\":3}");
}

TEST(WireTest, CountsAreStrictDecimals) {
  EXPECT_EQ(ParseCount("0"), 0);
  EXPECT_EQ(ParseCount("10000"), 10000);
  EXPECT_EQ(ParseCount("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "01", "-1", "+1", " 1", "1 ", "1e3", "0x10", "9223372036854775808"}) {
    EXPECT_EQ(ParseCount(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseCount("0", 1), std::nullopt);
}

}  // namespace
}  // namespace fencekit::wire
