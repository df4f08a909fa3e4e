// fenced against a hostile client: the bytes below are what an attacker would send, written raw
// because curl and the C++ client would normalise them.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "support/server_fixture.h"

namespace fencekit {
namespace {

using testing::FencedProcess;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::WaitFor;

using HostileClientTest = testing::ServerFixture;

// True when no header of `r` was made from the client's bytes.
bool NoInjectedHeader(const RawResponse& r) {
  return r.headers.count("x-injected") == 0 && r.headers.count("set-cookie") == 0;
}

std::uint64_t MetricValue(const std::string& metrics, const std::string& line_prefix) {
  auto at = metrics.find("\n" + line_prefix + " ");
  if (at == std::string::npos) return UINT64_MAX;
  return std::strtoull(metrics.c_str() + at + line_prefix.size() + 2, nullptr, 10);
}

// --- Response splitting -------------------------------------------------------------------

TEST_F(HostileClientTest, KeyWithCrLfIsRefusedSoItCanNeverSplitAResponse) {
  // The lock defaults to the key, and GET echoes the lock in Fencing-Lock.
  const std::string evil = "a%0D%0AX-Injected:%201%0D%0A%0D%0AHTTP/1.1%20200%20OK";
  auto put = PutWithToken(evil, "1");
  EXPECT_EQ(put.status, 400);
  EXPECT_NE(put.body.find("\"error\":\"bad_key\""), std::string::npos) << put.body;
  EXPECT_NE(put.body.find("control character %0D"), std::string::npos) << put.body;
  // Pipelined behind the GET of the same key, a forged second response would show up here.
  RawConnection c(server_->port());
  c.Send(Request("GET", "/v1/objects/" + evil) + Request("GET", "/healthz"));
  auto first = c.Read();
  EXPECT_EQ(first.status, 400);
  EXPECT_TRUE(NoInjectedHeader(first));
  auto second = c.Read();
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, "{\"status\":\"ok\"}\n");
}

// An answer to HEAD carries no body bytes, refusals included: otherwise a keep-alive client
// reads them as the start of the next response.
TEST_F(HostileClientTest, HeadRefusalsCarryNoBodySoTheConnectionStaysInStep) {
  RawConnection c(server_->port());
  c.Send(Request("HEAD", "/v1/objects/absent") + Request("HEAD", "/v1/objects/a%0Ab") +
         Request("GET", "/healthz"));
  auto missing = c.ReadHeadAnswer();
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.header("content-length"), "0");  // the length a GET's body would have
  EXPECT_EQ(c.ReadHeadAnswer().status, 400);
  auto health = c.Read();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "{\"status\":\"ok\"}\n");
}

TEST_F(HostileClientTest, LockNameWithControlCharacterIsRefused) {
  // HTTP allows a tab inside a field value; fenced's name rule does not.
  auto tab = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"Fencing-Lock", "a\tb"}}, "v");
  EXPECT_EQ(tab.status, 400);
  EXPECT_NE(tab.body.find("\"error\":\"bad_lock\""), std::string::npos) << tab.body;
  // Other control characters are not even valid HTTP.
  for (std::string lock : {std::string("a\x01"
                                       "b"),
                           std::string("a\x7F"
                                       "b")}) {
    auto r = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"Fencing-Lock", lock}}, "v");
    EXPECT_EQ(r.status, 400) << r.body;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HostileClientTest, FencingLockHeaderIsSentPercentEncoded) {
  const std::string lock = "r\xC3\xA9ports/q3 100%";
  auto put = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "3"}, {"Fencing-Lock", lock}}, "v");
  ASSERT_EQ(put.status, 201) << put.body;
  auto got = Call("GET", "/v1/objects/k");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.header("fencing-lock"), "r%C3%A9ports/q3%20100%25");
  // The header's value names the fence as it is.
  auto fence = Call("GET", "/v1/fences/" + got.header("fencing-lock"));
  EXPECT_NE(fence.body.find("\"highest\":3"), std::string::npos) << fence.body;
}

// --- Request smuggling --------------------------------------------------------------------

// A body that is itself a request: executed if fenced misjudges where the first one ends.
const std::string kSmuggled =
    "PUT /v1/objects/smuggled HTTP/1.1\r\nHost: x\r\nFencing-Token: 99\r\n"
    "Content-Length: 1\r\n\r\nX";

TEST_F(HostileClientTest, FinalTransferCodingOtherThanChunkedGets400AndClose) {
  for (std::string coding : {"gzip", "chunked, gzip", "identity", "chunked, chunked", ""}) {
    RawConnection c(server_->port());
    c.Send("PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nTransfer-Encoding: " +
           coding + "\r\n\r\n" + kSmuggled);
    auto r = c.Read();
    EXPECT_EQ(r.status, 400) << coding;
    EXPECT_NE(r.body.find("\"error\":\"bad_framing\""), std::string::npos) << r.body;
    EXPECT_EQ(r.header("connection"), "close") << coding;
    EXPECT_TRUE(c.ClosedByPeer()) << coding;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/smuggled").status, 404);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HostileClientTest, UnknownCodingBeforeChunkedGets501AndClose) {
  for (std::string lines : {"Transfer-Encoding: gzip, chunked\r\n",
                            "Transfer-Encoding: x-custom\r\nTransfer-Encoding: chunked\r\n"}) {
    RawConnection c(server_->port());
    c.Send("PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n" + lines +
           "\r\n1\r\nv\r\n0\r\n\r\n" + kSmuggled);
    auto r = c.Read();
    EXPECT_EQ(r.status, 501) << lines;
    EXPECT_NE(r.body.find("unsupported_transfer_coding"), std::string::npos) << r.body;
    EXPECT_TRUE(c.ClosedByPeer()) << lines;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/smuggled").status, 404);
}

TEST_F(HostileClientTest, ContentLengthBesideTransferEncodingGets400) {
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 3\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
      kSmuggled);
  EXPECT_EQ(c.Read().status, 400);
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_EQ(Call("GET", "/v1/objects/smuggled").status, 404);
}

TEST_F(HostileClientTest, TransferEncodingOnHttp10Gets400) {
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.0\r\nFencing-Token: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1\r\nv\r\n0\r\n\r\n");
  EXPECT_EQ(c.Read().status, 400);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

// --- Fields from trailers -----------------------------------------------------------------

TEST_F(HostileClientTest, FencingFieldsInTrailersAreIgnored) {
  RawConnection c(server_->port());
  // The header section says token 5 on lock k; the trailer tries token 100 on lock "other".
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 5\r\n"
      "Transfer-Encoding: chunked\r\nTrailer: Fencing-Token, Fencing-Lock\r\n\r\n"
      "1\r\nv\r\n0\r\nFencing-Token: 100\r\nFencing-Lock: other\r\n\r\n");
  auto r = c.Read();
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.body, "{\"key\":\"k\",\"lock\":\"k\",\"token\":5,\"version\":1}\n");
  EXPECT_EQ(Call("GET", "/v1/fences/k").body, "{\"lock\":\"k\",\"highest\":5}\n");
  EXPECT_EQ(Call("GET", "/v1/fences/other").body, "{\"lock\":\"other\",\"highest\":0}\n");
  // A token sent only as a trailer is no token at all.
  c.Send(
      "PUT /v1/objects/k2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1\r\nv\r\n0\r\nFencing-Token: 100\r\n\r\n");
  EXPECT_EQ(c.Read().status, 428);
  EXPECT_EQ(Call("GET", "/v1/objects/k2").status, 404);
}

// --- Lax parsing --------------------------------------------------------------------------

TEST_F(HostileClientTest, MalformedChunkGets400AndIsCounted) {
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
  auto r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("could not be parsed"), std::string::npos) << r.body;
  EXPECT_TRUE(c.ClosedByPeer());
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
  auto metrics = Call("GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fenced_writes_refused_total{reason=\"bad_request\"}"), 1u)
      << metrics;
}

TEST_F(HostileClientTest, Http11WithoutExactlyOneValidHostGets400) {
  for (std::string host_lines : {std::string(), std::string("Host: a\r\nHost: b\r\n"),
                                 std::string("Host: user@x\r\n"), std::string("Host: a b\r\n")}) {
    RawConnection c(server_->port());
    c.Send("GET /healthz HTTP/1.1\r\n" + host_lines + "\r\n");
    auto r = c.Read();
    EXPECT_EQ(r.status, 400) << host_lines;
    EXPECT_NE(r.body.find("\"error\":\"bad_host\""), std::string::npos) << r.body;
  }
  RawConnection c(server_->port());
  c.Send("GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(c.Read().status, 200);  // HTTP/1.0 has no Host requirement
  RawConnection port(server_->port());
  port.Send("GET /healthz HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
  EXPECT_EQ(port.Read().status, 200);
}

TEST_F(HostileClientTest, TokenGrammarIsExactlyTheDocumentedOne) {
  for (const char* bad : {"05", "00", "5 6", "5\t6", "\xEF\xBC\x95" /* fullwidth 5 */}) {
    auto r = PutWithToken("k", bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("invalid_token"), std::string::npos) << bad;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
  // Whitespace around a field value is not part of it (RFC 9110 5.5): HTTP strips it.
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: \t 7 \t\r\n"
      "Content-Length: 1\r\n\r\nv");
  auto r = c.Read();
  EXPECT_EQ(r.status, 201);
  EXPECT_NE(r.body.find("\"token\":7"), std::string::npos) << r.body;
}

TEST_F(HostileClientTest, NamesThatAreNotStrictUtf8ArePercentEncodedInJson) {
  // A surrogate (U+D800) and an overlong '/' are not UTF-8, whatever a lax decoder says.
  for (std::string encoded : {"%ED%A0%80", "%C0%AF", "%F4%90%80%80"}) {
    auto r = PutWithToken(encoded, "1");
    ASSERT_EQ(r.status, 201) << encoded;
    EXPECT_NE(r.body.find("\"key\":\"" + encoded + "\",\"key_encoding\":\"percent\""),
              std::string::npos)
        << r.body;
  }
}

// --- Connection limits --------------------------------------------------------------------

TEST_F(HostileClientTest, ConnectionBeyondTheLimitGets503AtOnceWhileOthersAreServed) {
  StartServer({.max_connections = 4});
  EXPECT_EQ(server_->max_connections(), 4u);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawConnection>(server_->port()));
    held.back()->Send(Request("GET", "/healthz"));
    ASSERT_EQ(held.back()->Read().status, 200);  // accepted and counted
  }
  for (int i = 0; i < 20; ++i) {
    RawConnection extra(server_->port());
    extra.Send(Request("GET", "/healthz"));
    auto r = extra.Read(std::chrono::seconds(2));
    ASSERT_EQ(r.status, 503) << i;
    EXPECT_EQ(r.header("retry-after"), "1");
    EXPECT_NE(r.body.find("too_many_connections"), std::string::npos);
    EXPECT_TRUE(extra.ClosedByPeer(std::chrono::seconds(2)));
  }
  // The connections already open keep being served.
  for (auto& c : held) {
    c->Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}}, "v"));
    EXPECT_NE(c->Read().status, 0);
  }
  auto metrics = [&] {
    held[0]->Send(Request("GET", "/metrics"));
    return held[0]->Read().body;
  };
  auto m = metrics();
  EXPECT_EQ(MetricValue(m, "fenced_connections_refused_total"), 20u) << m;
  EXPECT_EQ(MetricValue(m, "fenced_connections_open"), 4u) << m;
  EXPECT_EQ(MetricValue(m, "fenced_connections_max"), 4u) << m;
  // A freed slot is usable again.
  held.pop_back();
  EXPECT_TRUE(WaitFor([&] { return MetricValue(metrics(), "fenced_connections_open") == 3; }));
  RawConnection again(server_->port());
  again.Send(Request("GET", "/healthz"));
  EXPECT_EQ(again.Read().status, 200);
}

// A flood past the file-descriptor limit: fenced keeps its limit below it, so the flood is
// answered instead of spinning on accept() failures, and a client already connected is served.
TEST(HostileClientProcessTest, FloodUnderLowFileLimitIsAnsweredAndDoesNotSpin) {
  // This process opens the 400 connections: it needs a limit of its own above that.
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  own.rlim_cur = own.rlim_max;
  setrlimit(RLIMIT_NOFILE, &own);
  ASSERT_GE(own.rlim_cur, 512u) << "raise ulimit -n to run this test";
  testing::TempDir dir;
  FencedProcess fenced(dir.File("f.db"), {}, /*max_open_files=*/256);
  ASSERT_NE(fenced.port(), 0);
  RawConnection first(fenced.port());
  first.Send(Request("GET", "/healthz"));
  ASSERT_EQ(first.Read().status, 200);
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 400; ++i) {
    flood.push_back(std::make_unique<RawConnection>(fenced.port()));
    ASSERT_TRUE(flood.back()->connected());
  }
  // A newcomer gets a quick answer (503: the limit is reached), not a hang.
  RawConnection late(fenced.port());
  late.Send(Request("GET", "/healthz"));
  auto r = late.Read(std::chrono::seconds(2));
  EXPECT_EQ(r.status, 503);
  first.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}}, "v"));
  EXPECT_EQ(first.Read(std::chrono::seconds(5)).status, 201);
  EXPECT_EQ(fenced.Output().find("accept failed"), std::string::npos) << fenced.Output();
  EXPECT_NE(fenced.Output().find("lowered to 128"), std::string::npos) << fenced.Output();
}

// --- Long reads ---------------------------------------------------------------------------

TEST_F(HostileClientTest, HistoryReadsDoNotDelayWritesOnTheIoThread) {
  StartServer({.threads = 1});
  // 10,000 decisions with long keys: each full history read is several megabytes of JSON.
  const std::string long_key(900, 'h');
  {
    RawConnection c(server_->port());
    std::string batch;
    for (int i = 1; i <= 10000; ++i) {
      batch += Request("PUT", "/v1/objects/" + long_key + std::to_string(i % 50),
                       {{"Fencing-Token", "1"}, {"Fencing-Lock", "l"}}, "v");
      if (i % 500 == 0) {
        c.Send(batch);
        batch.clear();
        for (int k = 0; k < 500; ++k) ASSERT_NE(c.Read().status, 0);
      }
    }
  }
  std::vector<std::unique_ptr<RawConnection>> readers;
  for (int i = 0; i < 10; ++i) {
    readers.push_back(std::make_unique<RawConnection>(server_->port()));
    readers.back()->Send(Request("GET", "/v1/history?limit=10000"));
  }
  auto start = std::chrono::steady_clock::now();
  auto put = PutWithToken("quick", "1");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(put.status, 201);
  EXPECT_LT(took, std::chrono::milliseconds(250))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  for (auto& r : readers) {
    auto h = r->Read(std::chrono::seconds(60));
    EXPECT_TRUE(h.status == 200 || h.status == 503) << h.status;
  }
}

TEST_F(HostileClientTest, LongReadsBeyondTheQueueGet503Busy) {
  StartServer({.long_read_threads = 1, .max_queued_long_reads = 0});
  for (const char* target : {"/v1/history?limit=1", "/v1/objects?prefix=a&limit=5"}) {
    auto r = Call("GET", target);
    EXPECT_EQ(r.status, 503) << target;
    EXPECT_EQ(r.header("retry-after"), "1") << target;
    EXPECT_NE(r.body.find("\"error\":\"busy\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("too many long reads are queued"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call("GET", "/v1/history?limit=10001").status, 400);
}

// One grammar for the history and the listing: each parameter at most once, none unknown.
TEST_F(HostileClientTest, HistoryRefusesARepeatedOrUnknownParameterAsListingDoes) {
  ASSERT_EQ(PutWithToken("k", "1").status, 201);
  for (std::string path : {"/v1/history", "/v1/objects"}) {
    auto twice = Call("GET", path + "?limit=1&limit=2");
    EXPECT_EQ(twice.status, 400) << path;
    EXPECT_NE(twice.body.find("\"error\":\"bad_target\""), std::string::npos) << twice.body;
    EXPECT_NE(twice.body.find("given more than once"), std::string::npos) << twice.body;
    auto unknown = Call("GET", path + "?limit=1&since=3");
    EXPECT_EQ(unknown.status, 400) << path;
    EXPECT_NE(unknown.body.find("unknown parameter \\\"since\\\""), std::string::npos)
        << unknown.body;
    EXPECT_EQ(Call("GET", path + "?limit=1").status, 200) << path;
  }
}

// The OpenAPI integer parameter's reading: leading zeros are the number's, an empty value is
// none given.
TEST_F(HostileClientTest, AListingsLimitTakesLeadingZerosAndAnEmptyOneIsTheDefault) {
  ASSERT_EQ(PutWithToken("k", "1").status, 201);
  ASSERT_EQ(PutWithToken("l", "1").status, 201);
  for (std::string path : {"/v1/history", "/v1/objects"}) {
    auto zeros = Call("GET", path + "?limit=001");
    EXPECT_EQ(zeros.status, 200) << path << ": " << zeros.body;
    auto all = Call("GET", path + "?limit=2");
    EXPECT_NE(zeros.body, all.body) << path << ": limit=001 is 1";
    auto empty = Call("GET", path + "?limit=");
    EXPECT_EQ(empty.status, 200) << path;
    EXPECT_EQ(empty.body, Call("GET", path).body) << path;
    EXPECT_EQ(Call("GET", path + "?limit=000").status, 400) << path;
    EXPECT_EQ(Call("GET", path + "?limit=&limit=1").status, 400) << path;  // given twice
  }
}

// RFC 8259 leaves an object naming a member twice to the receiver, and parsers disagree (the
// last, or the first, wins): fenced refuses it, and writes nothing.
TEST_F(HostileClientTest, AJsonBodyNamingAMemberTwiceIsRefusedAndChangesNothing) {
  for (const std::string body :
       {R"({"lock":"l","token":1,"token":9,"writes":[{"op":"put","key":"d","value":"v"}]})",
        R"({"lock":"l","token":1,"writes":[{"op":"put","key":"d","key":"e","value":"v"}]})",
        R"({"lock":"l","token":1,"writes":[{"op":"put","key":"d","k\u0065y":"e","value":"v"}]})"}) {
    auto r = Call("POST", "/v1/batch", {}, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find("\"error\":\"bad_body\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("twice"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call("GET", "/v1/objects/d").status, 404);
  EXPECT_EQ(Call("GET", "/v1/objects/e").status, 404);
  EXPECT_NE(Call("GET", "/v1/fences/l").body.find("\"highest\":0"), std::string::npos);
  // Arrays may repeat anything; objects in different places may share names.
  EXPECT_EQ(Call("POST", "/v1/batch", {},
                 R"({"lock":"l","token":1,"writes":[{"op":"put","key":"d","value":"v"},)"
                 R"({"op":"put","key":"e","value":"v"}]})")
                .status,
            200);
}

// RFC 9112 3.2.2: a server must accept a request target in absolute-form, and then take the
// host from it, not from Host.
TEST_F(HostileClientTest, AnAbsoluteFormTargetIsAcceptedAsItsPath) {
  RawConnection c(server_->port());
  c.Send("PUT http://127.0.0.1/v1/objects/abs?x HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
         "Content-Length: 1\r\n\r\nv");
  auto query = c.Read();
  EXPECT_EQ(query.status, 400);  // the query stays a query: bad_target, as in origin-form
  EXPECT_NE(query.body.find("bad_target"), std::string::npos) << query.body;
  c.Send("PUT http://127.0.0.1:1/v1/objects/abs HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
         "Content-Length: 1\r\n\r\nv");
  EXPECT_EQ(c.Read().status, 201);
  c.Send("GET HTTP://localhost/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c.Read().status, 200);
  c.Send("GET http://localhost HTTP/1.1\r\nHost: x\r\n\r\n");  // an empty path is "/"
  EXPECT_EQ(c.Read().status, 404);
  EXPECT_EQ(Call("GET", "/v1/objects/abs").body, "v");
  for (const char* target : {"ftp://h/healthz", "http://user@h/healthz", "h/healthz"}) {
    RawConnection d(server_->port());
    d.Send(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto r = d.Read();
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_NE(r.body.find("bad_target"), std::string::npos) << target << ": " << r.body;
  }
}

}  // namespace
}  // namespace fencekit
