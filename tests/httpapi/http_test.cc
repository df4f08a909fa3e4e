// The fenced HTTP server on an ephemeral loopback port, spoken to with raw bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "support/server_fixture.h"

namespace fencekit {
namespace {

using testing::RawConnection;
using testing::RawResponse;
using testing::Request;

using HttpTest = testing::ServerFixture;
// The store contract over HTTP, on a SQLite file and on a PostgreSQL database.
using HttpEngineTest = testing::EngineServerFixture;
FENCEKIT_ON_EACH_ENGINE(HttpEngineTest);

TEST_P(HttpEngineTest, PutCreatesThenOverwrites) {
  auto r = PutWithToken("k", "5", "one");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "{\"key\":\"k\",\"lock\":\"k\",\"token\":5,\"version\":1}\n");
  r = PutWithToken("k", "5", "two");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"version\":2"), std::string::npos);
}

TEST_P(HttpEngineTest, StaleTokenGets409NamingHighest) {
  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  auto r = PutWithToken("k", "4", "stale");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.header("fencing-highest"), "5");
  EXPECT_NE(r.body.find("\"error\":\"stale_token\""), std::string::npos);
  EXPECT_NE(r.body.find("\"highest\":5"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/objects/k").body, "v");
}

TEST_P(HttpEngineTest, MissingTokenGets428) {
  auto r = Call("PUT", "/v1/objects/k", {}, "v");
  EXPECT_EQ(r.status, 428);
  EXPECT_NE(r.body.find("missing_token"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, MalformedTokensGet400) {
  for (const char* bad : {"abc", "-5", "+5", "1 2", "0x10", "0", "9223372036854775808", "1.5"}) {
    auto r = PutWithToken("k", bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("invalid_token"), std::string::npos) << bad;
  }
  auto twice = Call("PUT", "/v1/objects/k", {{"Fencing-Token", "5"}, {"Fencing-Token", "6"}}, "v");
  EXPECT_EQ(twice.status, 400);
  EXPECT_NE(twice.body.find("more than once"), std::string::npos);
  EXPECT_EQ(PutWithToken("k", "9223372036854775807").status, 201);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 200);
}

TEST_P(HttpEngineTest, FencingLockHeaderNamesTheFence) {
  auto r = Call("PUT", "/v1/objects/a", {{"Fencing-Token", "10"}, {"Fencing-Lock", "shared"}}, "v");
  ASSERT_EQ(r.status, 201);
  EXPECT_NE(r.body.find("\"lock\":\"shared\""), std::string::npos);
  // Another key under the same lock with an older token is refused.
  r = Call("PUT", "/v1/objects/b", {{"Fencing-Token", "9"}, {"Fencing-Lock", "shared"}}, "v");
  EXPECT_EQ(r.status, 409);
  auto fence = Call("GET", "/v1/fences/shared");
  EXPECT_EQ(fence.status, 200);
  EXPECT_EQ(fence.body, "{\"lock\":\"shared\",\"highest\":10}\n");
  EXPECT_EQ(Call("GET", "/v1/fences/never").body, "{\"lock\":\"never\",\"highest\":0}\n");
}

TEST_P(HttpEngineTest, GetReturnsValueWithTokenAndVersionHeaders) {
  ASSERT_EQ(PutWithToken("k", "3", "hello").status, 201);
  auto r = Call("GET", "/v1/objects/k");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.header("fencing-token"), "3");
  EXPECT_EQ(r.header("object-version"), "1");
  EXPECT_EQ(Call("GET", "/v1/objects/absent").status, 404);
}

TEST_P(HttpEngineTest, DeleteIsFenced) {
  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  EXPECT_EQ(Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "4"}}).status, 409);
  EXPECT_EQ(Call("DELETE", "/v1/objects/k").status, 428);
  auto r = Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "5"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"deleted\":true"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, BadKeysGet400) {
  EXPECT_EQ(PutWithToken("", "1").status, 400);
  EXPECT_EQ(PutWithToken(std::string(1025, 'k'), "1").status, 400);
  EXPECT_EQ(PutWithToken(std::string(1024, 'k'), "1").status, 201);
  auto nul = PutWithToken("a%00b", "1");
  EXPECT_EQ(nul.status, 400);
  EXPECT_NE(nul.body.find("NUL"), std::string::npos);
  EXPECT_EQ(PutWithToken("bad%zzescape", "1").status, 400);
  EXPECT_EQ(PutWithToken("a?b", "1").status, 400);
}

TEST_F(HttpTest, UnknownRouteGets404AndWrongMethodGets405) {
  EXPECT_EQ(Call("GET", "/v2/things").status, 404);
  auto r = Call("POST", "/v1/objects/k", {}, "v");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, HEAD, PUT, DELETE");
  auto fence = Call("DELETE", "/v1/fences/x");
  EXPECT_EQ(fence.status, 405);
  EXPECT_EQ(fence.header("allow"), "GET, PUT");
}

TEST_P(HttpEngineTest, OversizedBodyGets413AndNothingIsStored) {
  StartServer({.max_body_bytes = 1000});
  auto r = PutWithToken("k", "1", std::string(1001, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("body_too_large"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
  EXPECT_EQ(PutWithToken("k", "1", std::string(1000, 'x')).status, 201);
}

TEST_F(HttpTest, ChunkedBodyOverLimitGets413) {
  StartServer({.max_body_bytes = 100});
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n"
      "c8\r\n" +
      std::string(200, 'x') + "\r\n0\r\n\r\n");
  EXPECT_EQ(c.Read().status, 413);
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, OversizedHeadersGet431) {
  StartServer({.max_header_bytes = 4096});
  auto r = Call("GET", "/v1/objects/k", {{"X-Big", std::string(5000, 'h')}});
  EXPECT_EQ(r.status, 431);
}

TEST_F(HttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  RawConnection c(server_->port());
  for (int i = 1; i <= 20; ++i) {
    c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", std::to_string(i)}}, "v"));
    auto r = c.Read();
    ASSERT_EQ(r.status, i == 1 ? 201 : 200) << i;
  }
}

TEST_F(HttpTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection c(server_->port());
  std::string batch;
  for (int i = 1; i <= 10; ++i) {
    batch += Request("PUT", "/v1/objects/p" + std::to_string(i), {{"Fencing-Token", "7"}},
                     "value" + std::to_string(i));
  }
  batch += Request("PUT", "/v1/objects/p1", {{"Fencing-Token", "6"}}, "stale");
  for (int i = 1; i <= 10; ++i) batch += Request("GET", "/v1/objects/p" + std::to_string(i));
  c.Send(batch);
  for (int i = 1; i <= 10; ++i) {
    auto r = c.Read();
    ASSERT_EQ(r.status, 201) << i;
    EXPECT_NE(r.body.find("\"key\":\"p" + std::to_string(i) + "\""), std::string::npos);
  }
  EXPECT_EQ(c.Read().status, 409);
  for (int i = 1; i <= 10; ++i) {
    auto r = c.Read();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "value" + std::to_string(i));
  }
}

TEST_F(HttpTest, ARequestArrivingAByteAtATimeIsAnswered) {
  // Each byte its own segment (the connection does not delay small sends): the server parses
  // the header and the body across many reads, then the request pipelined behind them.
  RawConnection c(server_->port());
  const std::string put = Request("PUT", "/v1/objects/k", {{"Fencing-Token", "3"}}, "0123456789");
  for (char byte : put) c.Send(std::string_view(&byte, 1));
  c.Send(Request("GET", "/v1/objects/k"));
  EXPECT_EQ(c.Read().status, 201);
  auto r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "0123456789");
}

TEST_F(HttpTest, AConnectionEndedInsideABodyIsClosedAndStoresNothing) {
  StartServer({.read_timeout = std::chrono::seconds(60)});  // closed by the EOF, not the timeout
  RawConnection c(server_->port());
  c.Send("PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 10\r\n\r\n");
  c.Send("abc");
  c.ShutdownWrite();
  EXPECT_TRUE(c.ClosedByPeer(std::chrono::seconds(10)));
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, AConnectionEndedInsideAHeaderGets400) {
  StartServer({.read_timeout = std::chrono::seconds(60)});
  RawConnection c(server_->port());
  c.Send("PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-To");
  c.ShutdownWrite();
  EXPECT_EQ(c.Read().status, 400);
  EXPECT_TRUE(c.ClosedByPeer(std::chrono::seconds(10)));
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, WritesOnManyConnectionsOverSeveralIoThreadsEachGetTheirOwnAnswer) {
  // The answers of one commit come back together (AnswerOutbox) and then go to each
  // connection's strand: none may reach another connection, or be lost.
  StartServer({.threads = 3});
  constexpr int kClients = 8, kWrites = 25;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      RawConnection conn(server_->port());
      for (int i = 0; i < kWrites && failures[c].empty(); ++i) {
        const std::string key = "c" + std::to_string(c) + "-" + std::to_string(i);
        conn.Send(Request("PUT", "/v1/objects/" + key, {{"Fencing-Token", "1"}}, key));
        auto r = conn.Read();
        if (r.status != 201 || r.body.find("\"key\":\"" + key + "\"") == std::string::npos) {
          failures[c] = key + ": " + std::to_string(r.status) + " " + r.body;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  EXPECT_EQ(Call("GET", "/v1/objects/c7-24").body, "c7-24");
}

TEST_P(HttpEngineTest, PercentEncodedAndNonAsciiKeysRoundTripByteExact) {
  // "a/b c%é" and raw bytes that are not UTF-8.
  struct Case {
    std::string encoded, decoded;
  } cases[] = {
      {"a%2Fb%20c%25%C3%A9", "a/b c%\xC3\xA9"},
      {"%FF%FE%80", "\xFF\xFE\x80"},
      {"nested/path/key", "nested/path/key"},
      {"%E6%97%A5%E6%9C%AC", "\xE6\x97\xA5\xE6\x9C\xAC"},
  };
  for (const auto& c : cases) {
    auto put = PutWithToken(c.encoded, "1", c.decoded + "-value");
    ASSERT_EQ(put.status, 201) << c.encoded << " " << put.body;
    auto got = Call("GET", "/v1/objects/" + c.encoded);
    EXPECT_EQ(got.body, c.decoded + "-value");
    auto stored = store_->Get(c.decoded);
    ASSERT_TRUE(stored.ok()) << c.encoded;
  }
  auto invalid_utf8 = PutWithToken("%FF%FE%80", "1");
  EXPECT_NE(invalid_utf8.body.find("\"key\":\"%FF%FE%80\",\"key_encoding\":\"percent\""),
            std::string::npos)
      << invalid_utf8.body;
}

TEST_F(HttpTest, ExpectContinueGets100BeforeTheBody) {
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/big HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.Read(std::chrono::seconds(10), /*return_interim=*/true).status, 100);
  c.Send("hello");
  EXPECT_EQ(c.Read().status, 201);
  EXPECT_EQ(Call("GET", "/v1/objects/big").body, "hello");
}

TEST_F(HttpTest, ExpectContinueWithTooLargeBodyGets413WithoutWaitingForIt) {
  StartServer({.max_body_bytes = 10});
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/big HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 11\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.Read(std::chrono::seconds(10), /*return_interim=*/true).status, 413);
}

// Real curl, as users run it: a large upload with Expect: 100-continue, and HTTP/1.0.
TEST_F(HttpTest, CurlWorksAsItIs) {
  std::string file = dir_.File("upload.bin");
  {
    std::string data(700 * 1024, 'u');
    FILE* f = std::fopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
  }
  auto run = [](const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
  };
  std::string base = "http://127.0.0.1:" + std::to_string(server_->port());
  std::string out =
      run("curl -s -w ' %{http_code}' -X PUT -H 'Expect: 100-continue' "
          "-H 'Fencing-Token: 3' --data-binary @" +
          file + " " + base + "/v1/objects/upload");
  EXPECT_NE(out.find("\"version\":1}\n 201"), std::string::npos) << out;
  EXPECT_EQ(store_->Get("upload")->value.size(), 700u * 1024);
  out = run("curl -s -0 -w ' %{http_code}' " + base + "/v1/fences/upload");
  EXPECT_NE(out.find("\"highest\":3}\n 200"), std::string::npos) << out;
}

TEST_F(HttpTest, Http10WithoutKeepAliveIsServedAndClosed) {
  ASSERT_EQ(PutWithToken("k", "1", "v10").status, 201);
  RawConnection c(server_->port());
  c.Send("GET /v1/objects/k HTTP/1.0\r\n\r\n");
  auto r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "v10");
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(HttpTest, IdleConnectionsTimeOutAndDoNotBlockNewClients) {
  StartServer({.read_timeout = std::chrono::milliseconds(300)});
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<RawConnection>(server_->port()));
  EXPECT_EQ(PutWithToken("k", "1").status, 201);  // served despite 300 idle connections
  EXPECT_TRUE(idle.front()->ClosedByPeer(std::chrono::seconds(10)));
}

TEST_F(HttpTest, SlowSenderIsCutOffByReadTimeout) {
  StartServer({.read_timeout = std::chrono::milliseconds(200)});
  RawConnection c(server_->port());
  c.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_TRUE(c.ClosedByPeer(std::chrono::seconds(10)));
  EXPECT_EQ(Call("GET", "/v1/objects/k").status, 404);
}

TEST_F(HttpTest, GarbageRequestGets400) {
  RawConnection c(server_->port());
  c.Send("THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(c.Read().status, 400);
}

TEST_P(HttpEngineTest, HistoryListsDecisionsOldestFirst) {
  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  ASSERT_EQ(PutWithToken("k", "4").status, 409);
  auto r = Call("GET", "/v1/history?limit=2");
  ASSERT_EQ(r.status, 200);
  auto accepted = r.body.find("\"token\":5,\"key\":\"k\",\"accepted\":true");
  auto refused = r.body.find("\"token\":4,\"key\":\"k\",\"accepted\":false,\"highest\":5");
  EXPECT_NE(accepted, std::string::npos) << r.body;
  EXPECT_NE(refused, std::string::npos) << r.body;
  EXPECT_LT(accepted, refused);
  EXPECT_EQ(Call("GET", "/v1/history?limit=0").status, 400);
  EXPECT_EQ(Call("GET", "/v1/history?limit=x").status, 400);
}

TEST_P(HttpEngineTest, HealthzAndMetrics) {
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  ASSERT_EQ(PutWithToken("k", "4").status, 409);
  ASSERT_EQ(Call("PUT", "/v1/objects/k", {}, "v").status, 428);
  auto m = Call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("fenced_writes_accepted_total 1\n"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("fenced_writes_refused_total{reason=\"stale_token\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("fenced_writes_refused_total{reason=\"missing_token\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("fenced_request_duration_seconds_bucket{le=\"+Inf\"}"), std::string::npos);
  EXPECT_NE(m.body.find("fenced_commit_batch_size_count 2\n"), std::string::npos);
}

TEST_F(HttpTest, StopFinishesInFlightRequestAndClosesIdleConnections) {
  RawConnection idle(server_->port());
  RawConnection busy(server_->port());
  // The 100 proves the server has read the headers: the request is in flight.
  busy.Send(
      "PUT /v1/objects/last HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_EQ(busy.Read(std::chrono::seconds(10), true).status, 100);
  server_->Stop();
  EXPECT_TRUE(idle.ClosedByPeer());
  busy.Send("hello");
  auto r = busy.Read();
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(busy.ClosedByPeer());
  server_->Wait();
  EXPECT_EQ(store_->Get("last")->value, "hello");
}

// A write's answer reaches the server's metrics, write watch and connection: destroying the
// server before the store answers must wait for it, not free what the answer uses.
TEST_F(HttpTest, DestroyingTheServerWaitsForTheStoreToAnswerItsWrites) {
  std::promise<void> asked;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  StoreOptions store_options;
  store_options.verify = [&asked, released](std::string_view, FencingToken) {
    asked.set_value();  // one write, one verification
    released.wait_for(std::chrono::seconds(30));
    return Result<TokenVerdict>(TokenVerdict{.current = true});
  };
  StartServer({.drain_timeout = std::chrono::milliseconds(50)}, std::move(store_options));
  RawConnection c(server_->port());
  c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}}, "v"));
  ASSERT_EQ(asked.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto destroyed = std::async(std::launch::async, [this] { server_.reset(); });
  // Past the drain timeout, the server has stopped but for the write the store holds.
  const bool gone_first =
      destroyed.wait_for(std::chrono::milliseconds(500)) == std::future_status::ready;
  release.set_value();
  EXPECT_FALSE(gone_first);
  EXPECT_EQ(destroyed.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto stored = store_->Get("k");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->value, "v");
}

}  // namespace
}  // namespace fencekit
