// The GC-pause demo end to end (real fenced, real client processes, real SIGSTOP), judged by
// its JSON; and its HTML timeline rendered by headless Chromium.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "fencekit/procutil/child_process.h"
#include "support/chromium.h"
#include "support/etcd_server.h"
#include "support/event_reader.h"
#include "support/serving_demo.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::DistinctImageBytes;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

struct DemoRun {
  int exit_code;
  std::string out, err;
  boost::json::object json;
};

DemoRun RunDemo(const TempDir& dir, std::vector<std::string> args) {
  std::string json_path = dir.File("demo.json");
  args.insert(args.begin(), {DEMO_BINARY, "--json", json_path, "--color", "never"});
  auto r = RunCommand(args);
  DemoRun run{r.exit_code, r.out, r.err, {}};
  boost::system::error_code ec;
  auto v = boost::json::parse(ReadFile(json_path), ec);
  if (!ec && v.is_object()) run.json = v.as_object();
  return run;
}

// The write events of `actor`, in order.
std::vector<boost::json::object> Writes(const boost::json::object& json, const std::string& actor) {
  std::vector<boost::json::object> out;
  for (const auto& e : json.at("events").as_array()) {
    const auto& o = e.as_object();
    if (o.at("actor").as_string() == actor && o.at("event").as_string() == "writes") {
      out.push_back(o);
    }
  }
  return out;
}

TEST(DemoTest, PausedClientsStaleWriteIsRefusedAndBsValueKept) {
  TempDir dir;
  auto run = RunDemo(dir, {});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A"), b = Writes(run.json, "B");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_LT(a[0].at("token").as_int64(), b[0].at("token").as_int64());
  EXPECT_EQ(b[0].at("status").as_string(), "accepted");
  EXPECT_EQ(a[0].at("status").as_string(), "refused, stale token");
  EXPECT_EQ(run.json.at("final_value").as_string(),
            "B's update (token " + std::to_string(b[0].at("token").as_int64()) + ")");
  EXPECT_TRUE(run.json.at("lesson_shown").as_bool());
  EXPECT_NE(run.out.find("verdict: stale write refused: the store kept B's value"),
            std::string::npos)
      << run.out;
  // Every event has the documented fields.
  for (const auto& e : run.json.at("events").as_array()) {
    for (const char* field : {"time_ms", "actor", "event", "token", "status"}) {
      EXPECT_TRUE(e.as_object().contains(field)) << field;
    }
  }
}

TEST(DemoTest, OnEtcdThePausedClientsOlderRevisionIsRefused) {
  testing::EtcdCluster etcd(1);
  TempDir dir;
  auto run = RunDemo(dir, {"--locks", etcd.uri()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A"), b = Writes(run.json, "B");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_LT(a[0].at("token").as_int64(), b[0].at("token").as_int64());
  EXPECT_EQ(a[0].at("status").as_string(), "refused, stale token");
  EXPECT_NE(std::string(run.json.at("final_value").as_string()).find("B's"), std::string::npos);
}

TEST(DemoTest, WithoutFencingTheStaleWriteOverwritesB) {
  TempDir dir;
  auto run = RunDemo(dir, {"--no-fencing"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].at("status").as_string(), "accepted");
  EXPECT_EQ(run.json.at("final_value").as_string(),
            "A's update (token " + std::to_string(a[0].at("token").as_int64()) + ")");
  EXPECT_FALSE(run.json.at("fencing").as_bool());
  EXPECT_NE(run.out.find("lost update: B's write was overwritten by A"), std::string::npos);
}

TEST(DemoTest, SlowNetworkDelayedWriteIsRefused) {
  TempDir dir;
  auto run = RunDemo(dir, {"--scenario", "slow-network"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A"), b = Writes(run.json, "B");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].at("status").as_string(), "refused, stale token");
  EXPECT_NE(std::string(run.json.at("final_value").as_string()).find("B's"), std::string::npos);
}

TEST(DemoTest, LockServiceRestartTwoHoldersNewServiceRefused) {
  TempDir dir;
  auto run = RunDemo(dir, {"--scenario", "lock-service-restart"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A"), b = Writes(run.json, "B");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_LT(b[0].at("token").as_int64(), a[0].at("token").as_int64());
  // The emptied Redis has a new identity: the fence, bound to the old one, refuses its tokens.
  EXPECT_EQ(b[0].at("status").as_string(), "refused, wrong lock service");
  EXPECT_EQ(a[1].at("status").as_string(), "accepted");
}

TEST(DemoTest, RedlockClockJumpTwoHoldersOlderTokenRefused) {
  TempDir dir;
  auto run = RunDemo(dir, {"--scenario", "clock-jump"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto a = Writes(run.json, "A"), b = Writes(run.json, "B");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_LT(a[0].at("token").as_int64(), b[0].at("token").as_int64());
  EXPECT_EQ(b[0].at("status").as_string(), "accepted");
  EXPECT_EQ(a[0].at("status").as_string(), "refused, stale token");
  bool two_holders = false;
  for (const auto& e : run.json.at("events").as_array()) {
    two_holders |=
        std::string(e.as_object().at("event").as_string()).find("two holders") != std::string::npos;
  }
  EXPECT_TRUE(two_holders);
}

TEST(DemoServeTest, TheScenarioWaitsForAViewerWhoSeesItThenFencedKeepsServing) {
  using namespace std::chrono_literals;
  TempDir dir;
  testing::ServingDemo demo(DEMO_BINARY, dir, {});
  ASSERT_TRUE(demo.started());
  EXPECT_EQ(demo.Output().find("Scenario gc-pause"), std::string::npos)
      << "it must wait for a viewer";

  // A viewer of fenced's own page (its feed; the demo's page is demo_page_test's): B's write
  // lands, then A's stale one bounces.
  const std::uint16_t port = demo.fenced_port();
  testing::EventReader page(port);
  ASSERT_EQ(page.ReadHeader(), 200);
  auto b = page.NextEvent(30s);
  ASSERT_TRUE(b) << demo.Output();
  EXPECT_EQ(b->second.at("decision").as_string(), "accepted");
  EXPECT_EQ(b->second.at("key").as_string(), "shared-record");
  EXPECT_EQ(b->second.at("lock").as_string(), "demo-lock");
  auto a = page.NextEvent(30s);
  ASSERT_TRUE(a) << demo.Output();
  EXPECT_EQ(a->second.at("decision").as_string(), "refused");
  EXPECT_EQ(a->second.at("reason").as_string(), "stale_token");
  const std::int64_t highest = b->second.at("token").as_int64();
  EXPECT_LT(a->second.at("token").as_int64(), highest);

  // Then it keeps serving: one's own writes land or bounce, on the page too.
  const std::string out = demo.WaitForOutput("Ctrl-C stops it.");
  EXPECT_NE(out.find("verdict: stale write refused"), std::string::npos) << out;
  EXPECT_NE(out.find("-H 'Fencing-Token: " + std::to_string(highest + 5) + "'"), std::string::npos)
      << out;
  testing::RawConnection c(port);
  for (std::int64_t token : {highest + 5, std::int64_t{1}}) {
    c.Send(testing::Request(
        "PUT", "/v1/objects/shared-record",
        {{"Fencing-Token", std::to_string(token)}, {"Fencing-Lock", "demo-lock"}}, "mine"));
    EXPECT_EQ(c.Read().status, token == 1 ? 409 : 200);
    auto e = page.NextEvent(10s);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->second.at("token").as_int64(), token);
    EXPECT_EQ(e->second.at("decision").as_string(), token == 1 ? "refused" : "accepted");
  }

  EXPECT_TRUE(demo.Interrupt());
  EXPECT_TRUE(page.ClosedByPeer(5s)) << "fenced stops with the demo";
}

// --serve --no-fencing: what it says matches what happens. Fencing is off, so the stale write
// lands, and so does each of one's own writes, whatever its token.
TEST(DemoServeTest, WithoutFencingItsHintsSayWhatHappens) {
  using namespace std::chrono_literals;
  TempDir dir;
  testing::ServingDemo demo(DEMO_BINARY, dir, {"--no-fencing"});
  ASSERT_TRUE(demo.started());
  EXPECT_NE(demo.Output().find("Fencing is OFF in this run"), std::string::npos)
      << demo.Output();
  const std::uint16_t port = demo.fenced_port();
  testing::EventReader page(port);
  ASSERT_EQ(page.ReadHeader(), 200);
  for (int i = 0; i < 2; ++i) {  // B's write, then A's stale one: both accepted
    auto e = page.NextEvent(30s);
    ASSERT_TRUE(e) << demo.Output();
    EXPECT_EQ(e->second.at("decision").as_string(), "accepted");
  }
  const std::string all = demo.WaitForOutput("Ctrl-C stops it.");
  const std::string out = all.substr(std::min(all.find("fenced keeps running"), all.size()));
  EXPECT_EQ(out.find("refused"), std::string::npos) << "no write will be refused: " << all;
  EXPECT_NE(out.find("# accepted too: fencing is off"), std::string::npos) << out;
  std::smatch m;
  const std::regex hint(R"(-H 'Fencing-Token: (\d+)'   # accepted\n)");
  ASSERT_TRUE(std::regex_search(out, m, hint)) << out;
  testing::RawConnection c(port);
  for (const std::string& token : {m[1].str(), std::string("1")}) {
    c.Send(testing::Request("PUT", "/v1/objects/shared-record",
                            {{"Fencing-Token", token}, {"Fencing-Lock", "demo-lock"}}, "mine"));
    EXPECT_EQ(c.Read().status, 200) << "token " << token;
  }
  EXPECT_TRUE(demo.Interrupt());
}

TEST(DemoTest, UnknownScenarioIsAClearError) {
  TempDir dir;
  auto run = RunDemo(dir, {"--scenario", "meteor-strike"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("unknown scenario"), std::string::npos) << run.err;
}

TEST(DemoHtmlTest, TimelineRendersInHeadlessChromiumOnATimeAxisWithoutOverlaps) {
  TempDir dir;
  std::string html = dir.File("timeline.html");
  auto run = RunCommand({DEMO_BINARY, "--html", html, "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string page = ReadFile(html);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"))
      << "the page must not load network resources";
  testing::Chromium browser(dir.path(), 1600, 900);
  ASSERT_TRUE(browser.Open("file://" + html)) << browser.Log();
  auto texts = [&](const std::string& selector) { return browser.Texts(selector); };
  EXPECT_EQ(texts(".lane-label"),
            (std::vector<std::string>{"Client A", "Client B", "Lock service", "Storage (fenced)"}));
  EXPECT_EQ(texts(".pause").size(), 1u);
  // Said once, on the store's lane: A's own lane only says that it writes.
  const auto labels = texts(".label");
  EXPECT_EQ(
      std::count(labels.begin(), labels.end(), "refuses A's write, token 1: it has seen token 2"),
      1)
      << ::testing::PrintToString(labels);
  for (const auto& label : labels) EXPECT_EQ(label.find("refused"), std::string::npos) << label;
  // The pause is a break of the axis, labelled with its length (the TTL, 1 s, at least). Other
  // gaps over the break threshold (60 ms) may be breaks too on a slow machine (a sanitizer
  // build, a loaded CI host), but only the pause lasts near a second.
  auto breaks = texts(".break-label");
  ASSERT_GE(breaks.size(), 1u);
  int long_breaks = 0;
  for (const auto& b : breaks) {
    std::string ms = b.substr(0, b.find(" ms"));
    std::erase(ms, ',');
    if (std::stoi(ms) >= 900) ++long_breaks;
  }
  EXPECT_EQ(long_breaks, 1) << ::testing::PrintToString(breaks);
  // No two texts of the diagram overlap, as the browser lays them out.
  EXPECT_EQ(browser.OverlappingTexts("svg text"), "");
  // Markers in time order left to right; events of the same moment (the store's refusal and
  // A's write, a grant and its acquisition) at the same x.
  auto marks = browser.Evaluate(
      "[...document.querySelectorAll('g.event')].map(g => [Number(g.querySelector('circle')"
      ".getAttribute('cx')), g.querySelector('.label').textContent])");
  ASSERT_TRUE(marks && marks->is_array());
  std::map<std::string, double> x_of;
  for (std::size_t i = 0; i < marks->as_array().size(); ++i) {
    const auto& m = marks->as_array()[i].as_array();
    x_of[std::string(m[1].as_string())] = m[0].to_number<double>();
    if (i > 0) {
      EXPECT_GE(m[0].to_number<double>(),
                marks->as_array()[i - 1].as_array()[0].to_number<double>());
    }
  }
  EXPECT_EQ(x_of["writes"], x_of["refuses A's write, token 1: it has seen token 2"]);
  EXPECT_EQ(x_of["acquires the lock"], x_of["grants the lock to B, token 2"]);  // B's, the last
  std::string png = browser.Screenshot();
  EXPECT_GT(DistinctImageBytes(png), 32) << "the screenshot looks blank";
  testing::SaveScreenshot(png, "timeline-fencing.png");
}

// The same timeline without fencing: the store's lane is not called fenced, and it says what
// A's accepted write did.
TEST(DemoHtmlTest, WithoutFencingTheStoreLaneSaysWhatWasLost) {
  TempDir dir;
  std::string html = dir.File("timeline.html");
  auto run = RunCommand({DEMO_BINARY, "--no-fencing", "--html", html, "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  testing::Chromium browser(dir.path(), 1600, 900);
  ASSERT_TRUE(browser.Open("file://" + html)) << browser.Log();
  auto lanes = browser.Evaluate(
      "[...document.querySelectorAll('.lane-label')].map(e => e.textContent).join('|')");
  ASSERT_TRUE(lanes && lanes->is_string());
  EXPECT_EQ(lanes->as_string(), "Client A|Client B|Lock service|Storage (no fencing)");
  auto lost = browser.Evaluate(
      "[...document.querySelectorAll('.label')].some(e => e.textContent === "
      "\"accepts A's write, token 1: it overwrites B's update (token 2), which is lost\")");
  EXPECT_EQ(lost, boost::json::value(true)) << ReadFile(html);
  std::string png = browser.Screenshot();
  EXPECT_GT(DistinctImageBytes(png), 32) << "the screenshot looks blank";
  testing::SaveScreenshot(png, "timeline-no-fencing.png");
}

}  // namespace
}  // namespace fencekit
