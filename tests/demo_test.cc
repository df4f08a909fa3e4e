// The GC-pause demo end to end (real fenced, real client processes, real SIGSTOP), judged by
// its JSON; and its HTML timeline rendered by headless Chromium.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "fencekit/procutil/child_process.h"
#include "support/chromium.h"
#include "support/etcd_server.h"
#include "support/event_reader.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::DistinctImageBytes;
using testing::RunCommand;
using testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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
  auto v = boost::json::parse(Slurp(json_path), ec);
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

// Starts fencekit-demo --serve with `args` (its output in dir/out) and returns the port of its
// fenced once it says where to watch; 0 (after a failure) when it does not.
std::uint16_t StartServing(procutil::ChildProcess& demo, const TempDir& dir,
                           std::vector<std::string> args) {
  using namespace std::chrono_literals;
  args.insert(args.begin(), {DEMO_BINARY, "--serve", "--color", "never"});
  EXPECT_TRUE(demo.Start({.argv = args, .output_path = dir.File("out")}).ok());
  std::string out;
  std::smatch m;
  const std::regex where("Open http://127\\.0\\.0\\.1:(\\d+)/ui in a browser");
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        out = Slurp(dir.File("out"));
        return std::regex_search(out, m, where);
      },
      30s))
      << out;
  if (m.empty()) return 0;
  EXPECT_EQ(out.find("Scenario gc-pause"), std::string::npos) << "it must wait for a viewer";
  return static_cast<std::uint16_t>(std::stoi(m[1].str()));
}

// Waits for the demo to say how to make one's own writes; its output then.
std::string WaitForHints(const TempDir& dir) {
  using namespace std::chrono_literals;
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Slurp(dir.File("out")).find("Ctrl-C stops it.") != std::string::npos; }, 30s))
      << Slurp(dir.File("out"));
  return Slurp(dir.File("out"));
}

// Stops the demo with Ctrl-C: it exits 0.
void Interrupt(procutil::ChildProcess& demo) {
  using namespace std::chrono_literals;
  demo.Signal(SIGINT);
  int status = 0;
  ASSERT_TRUE(
      testing::WaitFor([&] { return waitpid(demo.pid(), &status, WNOHANG) == demo.pid(); }, 10s));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(DemoServeTest, TheScenarioWaitsForAViewerWhoSeesItThenFencedKeepsServing) {
  using namespace std::chrono_literals;
  TempDir dir;
  procutil::ChildProcess demo;
  const std::uint16_t port = StartServing(demo, dir, {});
  ASSERT_NE(port, 0);

  // The viewer: what the page reads. B's write lands, then A's stale one bounces.
  testing::EventReader page(port);
  ASSERT_EQ(page.ReadHeader(), 200);
  auto b = page.NextEvent(30s);
  ASSERT_TRUE(b) << Slurp(dir.File("out"));
  EXPECT_EQ(b->second.at("decision").as_string(), "accepted");
  EXPECT_EQ(b->second.at("key").as_string(), "shared-record");
  EXPECT_EQ(b->second.at("lock").as_string(), "demo-lock");
  auto a = page.NextEvent(30s);
  ASSERT_TRUE(a) << Slurp(dir.File("out"));
  EXPECT_EQ(a->second.at("decision").as_string(), "refused");
  EXPECT_EQ(a->second.at("reason").as_string(), "stale_token");
  const std::int64_t highest = b->second.at("token").as_int64();
  EXPECT_LT(a->second.at("token").as_int64(), highest);

  // Then it keeps serving: one's own writes land or bounce, on the page too.
  const std::string out = WaitForHints(dir);
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

  Interrupt(demo);
  EXPECT_TRUE(page.ClosedByPeer(5s)) << "fenced stops with the demo";
}

// --serve --no-fencing: what it says matches what happens. Fencing is off, so the stale write
// lands, and so does each of one's own writes, whatever its token.
TEST(DemoServeTest, WithoutFencingItsHintsSayWhatHappens) {
  using namespace std::chrono_literals;
  TempDir dir;
  procutil::ChildProcess demo;
  const std::uint16_t port = StartServing(demo, dir, {"--no-fencing"});
  ASSERT_NE(port, 0);
  EXPECT_NE(Slurp(dir.File("out")).find("Fencing is OFF in this run"), std::string::npos)
      << Slurp(dir.File("out"));
  testing::EventReader page(port);
  ASSERT_EQ(page.ReadHeader(), 200);
  for (int i = 0; i < 2; ++i) {  // B's write, then A's stale one: both accepted
    auto e = page.NextEvent(30s);
    ASSERT_TRUE(e) << Slurp(dir.File("out"));
    EXPECT_EQ(e->second.at("decision").as_string(), "accepted");
  }
  const std::string all = WaitForHints(dir);
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
  Interrupt(demo);
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
  std::string page = Slurp(html);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"))
      << "the page must not load network resources";
  testing::Chromium browser(dir.path(), 1600, 900);
  ASSERT_TRUE(browser.Open("file://" + html)) << browser.Log();
  auto texts = [&](const std::string& selector) {
    auto v = browser.Evaluate("[...document.querySelectorAll('" + selector +
                              "')].map(e => e.textContent)");
    std::vector<std::string> out;
    if (v && v->is_array()) {
      for (const auto& e : v->as_array()) out.emplace_back(e.as_string());
    }
    return out;
  };
  EXPECT_EQ(texts(".lane-label"),
            (std::vector<std::string>{"Client A", "Client B", "Lock service", "Storage (fenced)"}));
  EXPECT_EQ(texts(".pause").size(), 1u);
  bool conflict = false;
  for (const auto& label : texts(".label"))
    conflict |= label.find("409 Conflict") != std::string::npos;
  EXPECT_TRUE(conflict);
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
  auto overlaps = browser.Evaluate(R"js((() => {
    const t = [...document.querySelectorAll('svg text')].map(e => [e.textContent, e.getBBox()]);
    const out = [];
    for (let i = 0; i < t.length; ++i) for (let j = i + 1; j < t.length; ++j) {
      const [a, b] = [t[i][1], t[j][1]];
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height &&
          b.y < a.y + a.height) out.push(t[i][0] + ' / ' + t[j][0]);
    }
    return out;
  })())js");
  ASSERT_TRUE(overlaps && overlaps->is_array());
  EXPECT_TRUE(overlaps->as_array().empty()) << boost::json::serialize(*overlaps);
  // Markers in time order left to right.
  auto xs = browser.Evaluate(
      "[...document.querySelectorAll('g.event circle')].map(c => Number(c.getAttribute('cx')))");
  ASSERT_TRUE(xs && xs->is_array());
  for (std::size_t i = 1; i < xs->as_array().size(); ++i) {
    EXPECT_GT(xs->as_array()[i].to_number<double>(), xs->as_array()[i - 1].to_number<double>());
  }
  std::string png = browser.Screenshot();
  EXPECT_GT(DistinctImageBytes(png), 32) << "the screenshot looks blank";
}

}  // namespace
}  // namespace fencekit
