// WriteResponseHead against Beast's own serializer: the session sends the head it makes and the
// body in one write, and a client must see exactly what the serializer would have sent.
#include <gtest/gtest.h>

#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>
#include <string>

#include "net/response_head.h"

namespace fencekit::httpapi {
namespace {

namespace http = boost::beast::http;
using Response = http::response<http::string_body>;

std::string BySerializer(const Response& res) {
  std::ostringstream out;
  out << res;
  return out.str();
}

std::string ByHead(const Response& res) {
  std::string head = "left over from an earlier answer";
  WriteResponseHead(res.base(), head);
  return head + res.body();
}

TEST(ResponseHead, JsonAnswerAsTheSerializerWritesIt) {
  Response res(http::status::created, 11);
  res.set(http::field::content_type, "application/json");
  res.set(http::field::etag, "\"7\"");
  res.keep_alive(true);
  res.body() = "{\"key\":\"k\",\"lock\":\"l\",\"token\":3,\"version\":7}\n";
  res.prepare_payload();
  EXPECT_EQ(ByHead(res), BySerializer(res));
}

TEST(ResponseHead, Http10CustomFieldsAndCloseAsTheSerializerWritesThem) {
  Response res(http::status::conflict, 10);
  res.set("Fencing-Highest", "42");
  res.set(http::field::retry_after, "1");
  res.insert("X-Twice", "a");
  res.insert("X-Twice", "b");
  res.keep_alive(false);
  res.body() = "stale";
  res.prepare_payload();
  const std::string bytes = ByHead(res);
  EXPECT_EQ(bytes, BySerializer(res));
  EXPECT_EQ(bytes.rfind("HTTP/1.0 409 Conflict\r\n", 0), 0u) << bytes;
}

TEST(ResponseHead, OwnReasonAndUnknownStatusAsTheSerializerWritesThem) {
  Response own(http::status::ok, 11);
  own.reason("Fine Indeed");
  own.prepare_payload();
  EXPECT_EQ(ByHead(own), BySerializer(own));
  EXPECT_EQ(ByHead(own).rfind("HTTP/1.1 200 Fine Indeed\r\n", 0), 0u);

  Response odd(static_cast<http::status>(599), 11);
  odd.prepare_payload();
  EXPECT_EQ(ByHead(odd), BySerializer(odd));
}

TEST(ResponseHead, HeadAnswerWithLengthButNoBodyAsTheSerializerWritesIt) {
  Response res(http::status::ok, 11);
  res.set(http::field::content_type, "application/octet-stream");
  res.content_length(1234);  // the length of the GET's body, which HEAD does not send
  EXPECT_EQ(ByHead(res), BySerializer(res));
  EXPECT_NE(ByHead(res).find("Content-Length: 1234\r\n\r\n"), std::string::npos);
}

}  // namespace
}  // namespace fencekit::httpapi
