// The real server answers each refusal with exactly the status and error name wire.h lists, so
// the client's reading of them (wire_test.cc) holds against what is actually sent.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <fstream>

#include "support/server_fixture.h"
#include "wire.h"

namespace fencekit {
namespace {

using testing::RawConnection;
using testing::Request;
using wire::Error;

using WireServerTest = testing::ServerFixture;

void ExpectRefusal(const testing::RawResponse& r, Error e, const std::string& what) {
  EXPECT_EQ(r.status, static_cast<int>(wire::Info(e).http_status)) << what << ": " << r.body;
  auto body = boost::json::parse(r.body);
  EXPECT_EQ(body.at("error").as_string(), wire::Info(e).name) << what;
  EXPECT_TRUE(body.at("message").is_string()) << what;
}

TEST_F(WireServerTest, EachRefusalCarriesItsListedStatusAndName) {
  StartServer({.max_body_bytes = 16, .max_header_bytes = 2048});
  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  ASSERT_EQ(
      Call("PUT", "/v1/objects/s", {{"Fencing-Token", "1"}, {"Fencing-Service", "redis:a"}}, "v")
          .status,
      201);
  struct Case {
    std::string request;
    Error error;
  } cases[] = {
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "4"}}, "v"), Error::kStaleToken},
      {Request("PUT", "/v1/objects/k", {}, "v"), Error::kMissingToken},
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "x"}}, "v"), Error::kInvalidToken},
      {Request("PUT", "/v1/objects/a%0Ab", {{"Fencing-Token", "1"}}, "v"), Error::kBadKey},
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "6"}, {"Fencing-Lock", ""}}, "v"),
       Error::kBadLock},
      {Request("GET", "/v1/objects/k?x"), Error::kBadTarget},
      {Request("GET", "/v1/history?limit=0"), Error::kBadLimit},
      {"NOT HTTP\r\n\r\n", Error::kBadRequest},
      {"PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
       Error::kBadFraming},
      {"GET /healthz HTTP/1.1\r\n\r\n", Error::kBadHost},
      {Request("GET", "/v1/objects/absent"), Error::kNotFound},
      {Request("POST", "/v1/objects/k", {}, "v"), Error::kMethodNotAllowed},
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "6"}}, std::string(17, 'v')),
       Error::kBodyTooLarge},
      {Request("GET", "/healthz", {{"X-Big", std::string(3000, 'h')}}), Error::kHeadersTooLarge},
      {"PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       Error::kUnsupportedTransferCoding},
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "6"}, {"Fencing-Lock", "other"}}, "v"),
       Error::kWrongLock},
      {Request("PUT", "/v1/objects/s", {{"Fencing-Token", "2"}, {"Fencing-Service", "etcd:b"}},
               "v"),
       Error::kWrongService},
      {Request("PUT", "/v1/objects/k", {{"Fencing-Token", "6"}, {"Fencing-Service", "a b"}}, "v"),
       Error::kBadService},
  };
  for (const auto& c : cases) {
    RawConnection conn(server_->port());
    conn.Send(c.request);
    ExpectRefusal(conn.Read(), c.error, std::string(wire::Info(c.error).name));
  }
}

TEST_F(WireServerTest, ServiceRequiredCarriesItsListedStatusAndName) {
  StartServer({}, {.require_service = true});
  ExpectRefusal(PutWithToken("k", "1"), Error::kServiceRequired, "service_required");
}

TEST_F(WireServerTest, BusyAndConnectionLimitRefusalsCarryTheirListedStatusAndName) {
  StartServer({.max_connections = 1, .max_queued_long_reads = 0});
  RawConnection first(server_->port());
  first.Send(Request("GET", "/v1/history"));
  ExpectRefusal(first.Read(), Error::kBusy, "busy");
  RawConnection second(server_->port());
  second.Send(Request("GET", "/healthz"));
  ExpectRefusal(second.Read(), Error::kTooManyConnections, "too_many_connections");
}

TEST_F(WireServerTest, StreamAndReadinessRefusalsCarryTheirListedStatusAndName) {
  StartServer({.max_event_streams = 0});
  ExpectRefusal(Call("GET", "/v1/events"), Error::kTooManyStreams, "too_many_streams");
  ASSERT_TRUE(store_->Close().ok());
  ExpectRefusal(Call("GET", "/readyz"), Error::kNotReady, "not_ready");
}

TEST_F(WireServerTest, AuthRefusalsCarryTheirListedStatusAndName) {
  // "t" may read and write k/; "admin-t" is admin (digests: printf %s TOKEN | sha256sum).
  std::string auth = dir_.File("auth.json");
  std::ofstream(auth) << R"({"principals": [
      {"name": "user", "read": ["k/"], "write": ["k/"], "token_sha256":
       "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"},
      {"name": "admin", "admin": true, "token_sha256":
       "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c"}]})";
  StartServer({.auth_file = auth});
  struct Case {
    std::string request;
    Error error;
  } cases[] = {
      {Request("GET", "/v1/objects/k/a"), Error::kUnauthorized},
      {Request("GET", "/v1/objects/x", {{"Authorization", "Bearer t"}}), Error::kForbidden},
      {Request("PUT", "/v1/fences/k/a", {{"Authorization", "Bearer admin-t"}}, "{}"),
       Error::kBadBody},
  };
  for (const auto& c : cases) {
    RawConnection conn(server_->port());
    conn.Send(c.request);
    ExpectRefusal(conn.Read(), c.error, std::string(wire::Info(c.error).name));
  }
}

}  // namespace
}  // namespace fencekit
