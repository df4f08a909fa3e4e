// fencekit-demo --serve's page server in process (demos/live/page_server.h): what it serves and
// refuses, its replay and its bounds; the story's record (StoryLog) and fenced's decisions as
// the story's events (VisitorWrites). The page itself, in Chromium: demo_page_test.cc.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "live/page_server.h"
#include "support/event_reader.h"
#include "support/test_support.h"
#include "live/visitor_writes.h"

namespace fencekit::demo {
namespace {

using namespace std::chrono_literals;
using testing::EventReader;
using testing::RawConnection;
using testing::Request;

Event Step(std::int64_t t, const std::string& lane, const std::string& text, Kind kind) {
  return {t, lane, text, 1, "", kind};
}

std::unique_ptr<PageServer> StartServer(PageServerOptions options = {}) {
  return testing::ValueOrThrow(PageServer::Start(options, StoryLog("gc-pause", true, 1s)),
                               "starting the page server");
}

TEST(DemoPageServerTest, ServesThePageAndItsFeedAndRefusesTheRestWithoutEcho) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  RawConnection c(server->port());
  c.Send(Request("GET", "/"));
  auto page = c.Read();
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(page.header("content-security-policy").find("default-src 'none'; script-src 'self'"),
            std::string::npos);
  EXPECT_EQ(page.header("x-content-type-options"), "nosniff");
  EXPECT_NE(page.body.find("/story.js"), std::string::npos);
  c.Send(Request("GET", "/story.js"));  // the same connection: kept alive
  EXPECT_EQ(c.Read().header("content-type"), "text/javascript; charset=utf-8");

  c.Send(Request("GET", "/<script>alert(1)</script>"));
  auto missing = c.Read();
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body.find("script"), std::string::npos) << "the request is not echoed";

  RawConnection post(server->port());
  post.Send(Request("POST", "/events", {}, "{\"forged\":true}"));
  auto refused = post.Read();
  EXPECT_EQ(refused.status, 405);
  EXPECT_EQ(refused.header("allow"), "GET");
  EXPECT_TRUE(post.ClosedByPeer());

  // A name that a rebinding DNS server points at 127.0.0.1: another site's page.
  RawConnection rebound(server->port());
  rebound.Send("GET / HTTP/1.1\r\nHost: evil.example:" + std::to_string(server->port()) +
               "\r\n\r\n");
  auto misdirected = rebound.Read();
  EXPECT_EQ(misdirected.status, 421);
  EXPECT_EQ(misdirected.body.find("evil"), std::string::npos);

  RawConnection large(server->port());
  large.Send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Large: " + std::string(9000, 'a') +
             "\r\n\r\n");
  EXPECT_EQ(large.Read().status, 0) << "a header section over 8 KiB gets nothing";
}

TEST(DemoPageServerTest, AStreamIsReplayedEverythingThenGetsTheRestLive) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  server->Begin();
  server->Add(Step(0, "A", "acquires the lock", Kind::kGrant), false);
  server->Add(Step(0, "lock service", "grants the lock to A", Kind::kGrant), false);
  server->End(boost::json::object{{"verdict", "done"}});

  EventReader page(server->port(), {}, 0, "/events");
  ASSERT_EQ(page.ReadHeader(), 200);
  EXPECT_NE(page.header().find("Content-Type: text/event-stream"), std::string::npos);
  std::vector<std::string> seen;
  for (int i = 0; i < 4; ++i) {
    auto e = page.NextEvent(5s);
    ASSERT_TRUE(e) << i;
    seen.push_back(
        e->first + ":" +
        (e->second.contains("label")
             ? std::string(e->second.at("label").as_string())
             : std::string(e->second.contains("state") ? e->second.at("state").as_string() : "")));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"hello:ended", "step:acquires the lock",
                                            "step:grants the lock to A, token 1", "end:"}));
  EXPECT_EQ(server->viewers(), 1u);

  server->Add(Step(5000, "store", "accepts a write to k", Kind::kAccepted), true);
  auto live = page.NextEvent(5s);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->second.at("label").as_string(), "accepts a write to k, token 1");
  EXPECT_TRUE(live->second.at("after").as_bool());
  page.Close();
  EXPECT_TRUE(testing::WaitFor([&] { return server->viewers() == 0; }, 5s));
}

TEST(DemoPageServerTest, PagesBeyondTheLimitAreRefused) {
  auto server = StartServer({.max_streams = 1});
  ASSERT_TRUE(server);
  EventReader first(server->port(), {}, 0, "/events");
  ASSERT_EQ(first.ReadHeader(), 200);
  EventReader second(server->port(), {}, 0, "/events");
  EXPECT_EQ(second.ReadHeader(), 503);
}

// A viewer that stops reading holds no more than max_queued_bytes: it is let go, and its page
// (were it a page) would reconnect and be replayed to.
TEST(DemoPageServerTest, AViewerThatStopsReadingIsLetGo) {
  auto server =
      StartServer({.max_queued_bytes = 64 << 10, .write_timeout = std::chrono::seconds(2)});
  ASSERT_TRUE(server);
  server->Begin();
  EventReader stalled(server->port(), {}, /*receive_buffer=*/4096, "/events");
  ASSERT_EQ(stalled.ReadHeader(), 200);
  ASSERT_TRUE(testing::WaitFor([&] { return server->viewers() == 1; }, 5s));
  const std::string text(300, 'x');
  for (int i = 0; i < 3000 && server->viewers() != 0; ++i) {
    server->Add(Step(i, "store", text, Kind::kNote), true);
  }
  EXPECT_TRUE(testing::WaitFor([&] { return server->viewers() == 0; }, 10s));
}

TEST(DemoStoryLogTest, TheReplayKeepsTheScenarioAndTheLatestVisitorWrites) {
  StoryLog log("gc-pause", false, 1s);
  EXPECT_NE(log.Replay(std::chrono::steady_clock::now()).find("\"state\":\"waiting\""),
            std::string::npos);
  log.Begin(std::chrono::steady_clock::now());
  for (int i = 0; i < 3; ++i)
    log.Add(Step(i, "A", "step " + std::to_string(i), Kind::kNote), false);
  log.End(boost::json::object{{"verdict", "v"}});
  const std::string long_label(10'000, 'k');
  for (std::size_t i = 0; i < StoryLog::kMaxVisitorEvents + 100; ++i) {
    log.Add(Step(1000 + static_cast<std::int64_t>(i), "store", long_label, Kind::kAccepted), true);
  }
  std::string replay = log.Replay(std::chrono::steady_clock::now());
  EXPECT_LT(replay.size(), std::size_t{1} << 20);
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = replay.find(needle); at != std::string::npos; at = replay.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("event: step\n"), 3 + StoryLog::kMaxVisitorEvents);
  EXPECT_NE(replay.find("event: forgotten\ndata: {\"writes\":100}"), std::string::npos);
  EXPECT_NE(replay.find("\"title\":\"Storage (no fencing)\""), std::string::npos);
  // In the order they happened: the scenario, its end, then the visitor's writes.
  EXPECT_LT(replay.find("step 2"), replay.find("event: end"));
  EXPECT_LT(replay.find("event: end"), replay.find("event: forgotten"));
  EXPECT_LT(replay.find("event: forgotten"), replay.find("kkkk"));
}

TEST(DemoStoryLogTest, ALabelCannotEndItsEventOrForgeAnother) {
  StoryLog log("gc-pause", true, 1s);
  log.Begin(std::chrono::steady_clock::now());
  std::string text = log.Add(
      Step(1, "store", "x\n\nevent: end\ndata: {\"verdict\":\"forged\"}\r\n", Kind::kNote), true);
  EXPECT_EQ(text.find("\n\n"), text.size() - 2) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

boost::json::object Decision(const std::string& json) {
  return boost::json::parse(json).as_object();
}

TEST(DemoVisitorWritesTest, FencedsDecisionsAreSaidAsTheScenariosWritesAre) {
  const auto start = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'000'000));
  VisitorWrites fenced(start, "demo-lock", true, 2);
  auto accepted = fenced.ToEvent(
      Decision(R"({"id":1,"time_ms":1005000,"op":"put","lock":"demo-lock","key":"shared-record",)"
               R"("token":7,"decision":"accepted","highest":7})"));
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->time_ms, 5000);
  EXPECT_EQ(accepted->actor, "store");
  EXPECT_EQ(Label(*accepted), "accepts a write to shared-record, token 7");
  auto refused = fenced.ToEvent(
      Decision(R"({"id":2,"time_ms":1004000,"op":"delete","lock":"other","key":"k%FF",)"
               R"("key_encoding":"percent","token":1,"decision":"refused","reason":"stale_token",)"
               R"("highest":9})"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->time_ms, 5000) << "never before the last one";
  EXPECT_EQ(Label(*refused),
            "refuses a delete of k%FF (percent-encoded) under lock other, token 1: it has seen "
            "token 9");
  auto long_key = fenced.ToEvent(
      Decision(R"({"time_ms":1006000,"op":"put","lock":"demo-lock","key":")" +
               std::string(500, 'k') + R"(","token":8,"decision":"accepted","highest":8})"));
  ASSERT_TRUE(long_key);
  EXPECT_LT(long_key->event.size(), 120u);
  EXPECT_FALSE(fenced.ToEvent(Decision(R"({"op":"set_fence","token":1,"time_ms":1})")));
  EXPECT_FALSE(fenced.ToEvent(Decision(R"({"op":"put","token":"1","time_ms":1})")));

  VisitorWrites unfenced(start, "demo-lock", false, 2);
  auto lower = unfenced.ToEvent(Decision(
      R"({"time_ms":1007000,"op":"put","lock":"demo-lock","key":"shared-record","token":1,)"
      R"("decision":"accepted","highest":0})"));
  ASSERT_TRUE(lower);
  EXPECT_EQ(Label(*lower),
            "accepts a write to shared-record, token 1: below token 2, yet accepted: without "
            "fencing it overwrites newer data");
}

}  // namespace
}  // namespace fencekit::demo
