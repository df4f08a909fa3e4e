// The HTTP protocol's one definition (httpapi/src/wire.h), read back the way each end reads it.
#include "wire.h"

#include <gtest/gtest.h>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>
#include <set>

#include "fencekit/common/text.h"
#include "fencekit/fencedstore/refusal.h"
#include "json_members.h"

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
    if (info.error == Error::kPreconditionFailed) {
      body["version"] = 12;
      PutName(body, "key", "k\xFF");
    }
    Status s = StatusFromReply(info.http_status, boost::json::serialize(body), "7",
                               "store refused a write");
    EXPECT_EQ(s.code(), info.client_code) << info.name << ": " << s.ToString();
    EXPECT_NE(s.message().find("store refused a write: why \"it\" failed"), std::string::npos)
        << s.message();
    if (info.client_code == StatusCode::kStaleToken) {
      EXPECT_EQ(HighestToken(s), 7);
    }
    if (info.client_code == StatusCode::kWrongLock) {
      EXPECT_EQ(BoundLock(s), "bound\xFF");
    }
    if (info.client_code == StatusCode::kPreconditionFailed) {
      EXPECT_EQ(CurrentVersion(s), 12);
      EXPECT_EQ(RefusedKey(s), "k\xFF");
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
  // A wrong-lock answer that does not name the bound lock (under --auth, to a principal that may
  // not read it) is still a wrong lock, with no name.
  Status hidden = StatusFromReply(409, ErrorBody(Error::kWrongLock, "m"), "", "x");
  EXPECT_TRUE(hidden.IsWrongLock()) << hidden.ToString();
  EXPECT_EQ(BoundLock(hidden).value_or("(none)"), "");
  // And a failed precondition that does not say the key's version.
  EXPECT_TRUE(
      StatusFromReply(412, ErrorBody(Error::kPreconditionFailed, "m"), "", "x").IsUnavailable());
}

TEST(WireTest, StoreStatusesMapToTheirRefusals) {
  EXPECT_EQ(ErrorForStoreStatus(StaleTokenRefusal("m", 3)), Error::kStaleToken);
  EXPECT_EQ(ErrorForStoreStatus(Status::InvalidArgument("m")), Error::kBadKey);
  EXPECT_EQ(ErrorForStoreStatus(Status::InvalidArgument("m"), Error::kBadLock), Error::kBadLock);
  EXPECT_EQ(ErrorForStoreStatus(Status::NotFound("m")), Error::kNotFound);
  EXPECT_EQ(ErrorForStoreStatus(Status::IoError("disk full")), Error::kStorageError);
  EXPECT_EQ(ErrorForStoreStatus(WrongLockRefusal("m", "a")), Error::kWrongLock);
  EXPECT_EQ(ErrorForStoreStatus(Status::WrongService("m")), Error::kWrongService);
  EXPECT_EQ(ErrorForStoreStatus(Status::UnverifiedToken("m")), Error::kUnverifiedToken);
  EXPECT_EQ(ErrorForStoreStatus(Status::PermissionDenied("m")), Error::kForbidden);
  EXPECT_EQ(ErrorForStoreStatus(Status::Timeout("lock service")), Error::kVerifyUnavailable);
  EXPECT_EQ(ErrorForStoreStatus(Status::Unavailable("closed")), Error::kStorageError);
  EXPECT_EQ(ErrorForStoreStatus(PreconditionRefusal("m", 3, "k")), Error::kPreconditionFailed);
}

// One vocabulary: a refusal the store decides is answered, recorded and counted by the name of
// its code; every refusal counted in the metrics is an error fenced answers.
TEST(WireTest, EveryStoreRefusalIsAnsweredByItsCodesName) {
  for (const Status& refusal :
       {StaleTokenRefusal("m", 1), WrongLockRefusal("m", "l"), Status::WrongService("m"),
        Status::UnverifiedToken("m"), PreconditionRefusal("m", 0, "k")}) {
    const ErrorInfo* row = FindError(StatusCodeName(refusal.code()));
    ASSERT_NE(row, nullptr) << refusal.ToString();
    EXPECT_EQ(row->client_code, refusal.code()) << row->name;
    EXPECT_TRUE(row->write_refusal) << row->name;
    EXPECT_EQ(ErrorForStoreStatus(refusal), row->error) << row->name;
  }
  for (std::size_t i = 0; i < kStatusCodeCount; ++i) {
    auto code = static_cast<StatusCode>(i);
    EXPECT_EQ(StatusCodeFromName(StatusCodeName(code)), code) << StatusCodeName(code);
  }
  EXPECT_EQ(StatusCodeFromName("no_such_code"), std::nullopt);
}

TEST(WireTest, PreconditionsAreOneStrongETagOrAStar) {
  auto parse = [](std::vector<std::string_view> if_match,
                  std::vector<std::string_view> if_none_match) {
    return ParsePrecondition(if_match, if_none_match);
  };
  EXPECT_EQ(parse({}, {}).value(), std::nullopt);
  EXPECT_EQ(parse({ETag(42)}, {}).value(), 42);
  EXPECT_EQ(ETag(42), "\"42\"");
  EXPECT_EQ(parse({}, {"*"}).value(), kIfAbsent);
  for (std::string_view bad : {"42", "W/\"42\"", "\"42\", \"43\"", "*", "\"0\"", "\"-1\"",
                               "\"4 2\"", "\"", "\"\"", "\"042\""}) {
    auto r = parse({bad}, {});
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad;
  }
  EXPECT_FALSE(parse({}, {"\"1\""}).ok());
  EXPECT_FALSE(parse({"\"1\""}, {"*"}).ok());
  EXPECT_FALSE(parse({"\"1\"", "\"1\""}, {}).ok());
  EXPECT_FALSE(parse({}, {"*", "*"}).ok());
}

TEST(WireTest, BatchesRoundTripThroughJson) {
  std::vector<ObjectWrite> writes = {{false, "a\xFF", "text", std::nullopt},
                                     {false, "b", std::string("\0\xC3", 2), 7},
                                     {true, "c", {}, kIfAbsent}};
  std::string body = BatchToJson("lock\xFE", FencingToken::FromInt(9).value(), "redis:01", writes);
  EXPECT_NE(body.find("\"value\":\"text\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"value_base64\":\"AMM=\""), std::string::npos) << body;
  bool too_many = true;
  auto batch = BatchFromJson(body, 3, &too_many);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_FALSE(too_many);
  EXPECT_EQ(batch->lock, "lock\xFE");
  EXPECT_EQ(batch->token.value(), 9);
  EXPECT_EQ(batch->service, "redis:01");
  ASSERT_EQ(batch->writes.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(batch->writes[i].is_delete, writes[i].is_delete) << i;
    EXPECT_EQ(batch->writes[i].key, writes[i].key) << i;
    EXPECT_EQ(batch->writes[i].value, writes[i].value) << i;
    EXPECT_EQ(batch->writes[i].if_version, writes[i].if_version) << i;
  }
  EXPECT_FALSE(BatchFromJson(body, 2, &too_many).ok());
  EXPECT_TRUE(too_many);

  std::vector<WriteReceipt> receipts = {
      {"a\xFF", "", {}, 3, true}, {"b", "", {}, 4, false}, {"c", "", {}, 0, false}};
  auto token = FencingToken::FromInt(9).value();
  auto answer = BatchReceiptsToJson("lock", token, receipts, {false, false, true});
  EXPECT_EQ(answer.at("writes").as_array()[2].as_object().at("deleted"), false);
  auto back = BatchReceiptsFromJson(answer, "lock", token, writes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[0].key, "a\xFF");
  EXPECT_TRUE((*back)[0].created);
  EXPECT_EQ((*back)[1].version, 4);
  EXPECT_EQ((*back)[2].lock, "lock");
  // An answer for other keys, or too few, is not taken.
  writes[1].key = "other";
  EXPECT_TRUE(BatchReceiptsFromJson(answer, "lock", token, writes).status().IsUnavailable());
  writes.pop_back();
  EXPECT_TRUE(BatchReceiptsFromJson(answer, "lock", token, writes).status().IsUnavailable());
}

// fenced reserves a batch's answer before deciding it: the bound must hold for every name, and
// stay close (a loose one refuses batches the budget could answer).
TEST(WireTest, ABatchsAnswerIsNeverLargerThanItsBoundNorMuchSmaller) {
  const std::string control = std::string("a\x01\x1f\"\\b", 6);
  const std::vector<std::pair<std::string, std::string>> names = {
      {"lock", "k"},
      {"", ""},
      {std::string(1024, 'l'), std::string(1024, 'k')},
      {control, control + control},
      {std::string(300, '\xFF'), std::string(300, '\xFE')},
      {"caf\xC3\xA9", "\xE2\x82\xAC/\xF0\x9F\x94\x92"}};
  for (const auto& [lock, key] : names) {
    for (bool is_delete : {false, true}) {
      std::vector<ObjectWrite> writes(200, ObjectWrite{.is_delete = is_delete, .key = key});
      std::vector<WriteReceipt> receipts(200, WriteReceipt{.key = key,
                                                           .version = INT64_MAX,
                                                           .created = false});
      const std::size_t size =
          boost::json::serialize(
              BatchReceiptsToJson(lock, FencingToken::FromInt(INT64_MAX).value(), receipts,
                                  std::vector<bool>(200, is_delete)))
              .size();
      const std::size_t bound = BatchReceiptsBound(lock, writes);
      EXPECT_LE(size, bound) << JsonSafeText(key);
      EXPECT_GE(size * 2, bound) << JsonSafeText(key) << ": " << size << " of " << bound;
    }
  }
}

TEST(WireTest, AMemberNamedTwiceInOneObjectIsFoundWhereverItIs) {
  EXPECT_EQ(DuplicateMember(R"({"a":1,"b":2})"), std::nullopt);
  EXPECT_EQ(DuplicateMember(R"({"a":1,"a":2})"), "a");
  EXPECT_EQ(DuplicateMember(R"({"a":{"b":1,"b":2}})"), "b");
  EXPECT_EQ(DuplicateMember(R"({"k\u0065y":1,"key":2})"), "key");  // escapes decoded
  // The same names in sibling or nested objects, and in an array's objects, are fine.
  EXPECT_EQ(DuplicateMember(R"({"a":{"a":1},"b":{"a":2},"c":[{"a":1},{"a":2}]})"), std::nullopt);
  // After a nested object closes, its parent's names are still the ones compared.
  EXPECT_EQ(DuplicateMember(R"({"a":{"x":1,"y":2},"b":3,"a":4})"), "a");
  // A large object (past the in-place search) and one nested in it.
  std::string large = "{";
  for (int i = 0; i < 100; ++i) large += "\"m" + std::to_string(i) + "\":{\"a\":1},";
  EXPECT_EQ(DuplicateMember(large + "\"z\":1}"), std::nullopt);
  EXPECT_EQ(DuplicateMember(large + "\"m7\":1}"), "m7");
  EXPECT_EQ(DuplicateMember(large + "\"n\":{\"q\":1,\"q\":2}}"), "q");
  EXPECT_EQ(DuplicateMember(R"({"a":1,)"), std::nullopt);  // malformed: the parse says why
}

TEST(WireTest, ListingsRoundTripThroughJson) {
  ObjectPage page{{{"k\xFF", "l", FencingToken::FromInt(2).value(), 5}}, std::string("k\xFF")};
  auto o = ObjectPageToJson(page);
  EXPECT_EQ(boost::json::serialize(o),
            "{\"objects\":[{\"key\":\"k%FF\",\"key_encoding\":\"percent\",\"version\":5,"
            "\"lock\":\"l\",\"token\":2}],\"next\":\"k%FF\",\"next_encoding\":\"percent\"}");
  auto back = ObjectPageFromJson(o);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->objects.size(), 1u);
  EXPECT_EQ(back->objects[0].key, "k\xFF");
  EXPECT_EQ(back->objects[0].version, 5);
  EXPECT_EQ(back->next, "k\xFF");
  EXPECT_FALSE(ObjectPageFromJson(boost::json::object{{"objects", 1}}).ok());
  EXPECT_EQ(ListTarget("a/b c", "", 0), "/v1/objects?prefix=a%2Fb%20c");
  EXPECT_EQ(ListTarget("", "k+", 5), "/v1/objects?prefix=&after=k%2B&limit=5");
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

TEST(WireTest, AReceiptBuiltInACallersBufferIsTheSameReceipt) {
  // fenced builds each receipt in a buffer on its stack; a key longer than that buffer spills
  // to the heap and the receipt is still whole.
  WriteReceipt r{std::string(300, 'k') + "\xFF", "l", FencingToken::FromInt(7).value(), 2, false};
  unsigned char scratch[64];
  boost::json::monotonic_resource memory(scratch, sizeof scratch);
  boost::json::object in_buffer = ReceiptToJson(r, /*is_delete=*/false, &memory);
  EXPECT_EQ(boost::json::serialize(in_buffer),
            boost::json::serialize(ReceiptToJson(r, /*is_delete=*/false)));
  EXPECT_EQ(GetName(in_buffer, "key"), r.key);
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
