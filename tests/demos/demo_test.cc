// The GC-pause demo end to end (real fenced, real client processes, real SIGSTOP), judged by
// its JSON; and its HTML timeline rendered by headless Chromium.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "fencekit/procutil/child_process.h"
#include "support/chromium.h"
#include "support/servers/etcd_server.h"
#include "support/event_reader.h"
#include "support/matching.h"
#include "support/servers/serving_demo.h"
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

// The events of `actor` whose kind is one of `kinds`, in order.
std::vector<boost::json::object> EventsOf(const boost::json::object& json, const std::string& actor,
                                          std::set<std::string> kinds) {
  std::vector<boost::json::object> out;
  for (const auto& e : json.at("events").as_array()) {
    const auto& o = e.as_object();
    if (o.at("actor").as_string() == actor && kinds.count(std::string(o.at("kind").as_string()))) {
      out.push_back(o);
    }
  }
  return out;
}

// The store's decisions on `client`'s writes: "accepted", "refused" or "overwrite" (accepted,
// and a newer update lost), in order.
std::vector<std::string> Decisions(const boost::json::object& json, const std::string& client) {
  std::vector<std::string> out;
  for (const auto& e : EventsOf(json, "store", {"accepted", "refused", "overwrite"})) {
    const std::string event(e.at("event").as_string());
    if (event.find(" " + client + "'s write") != std::string::npos) {
      out.push_back(std::string(e.at("kind").as_string()));
    }
  }
  return out;
}

std::string Text(const boost::json::object& o, const char* field) {
  return std::string(o.at(field).as_string());
}

// Every event of `json` in causal order at each moment: a client's write before the store's
// decision on it (unless the write was sent earlier, held in the network), a grant before its
// acquisition. Returns what is out of order.
std::string CausalOrderErrors(const boost::json::object& json) {
  std::string errors;
  const auto& events = json.at("events").as_array();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i].as_object();
    const std::string event = Text(e, "event"), kind = Text(e, "kind");
    if (Text(e, "actor") == "store" &&
        (kind == "accepted" || kind == "refused" || kind == "overwrite")) {
      // The writer's "writes" (or the held write's arrival) comes right before.
      if (i == 0) {
        errors += "a decision first; ";
        continue;
      }
      const auto& before = events[i - 1].as_object();
      if (Text(before, "event") != "writes" && Text(before, "kind") != "arrive") {
        errors += "before \"" + event + "\": \"" + Text(before, "event") + "\"; ";
      }
    }
    if (event == "acquires the lock" && i > 0) {
      const auto& before = events[i - 1].as_object();
      const bool grant = Text(before, "event").starts_with("grants the lock to ");
      const bool redlock = json.contains("lanes");  // clock-jump: no lock-service lane
      if (!grant && !redlock) errors += "\"acquires\" without its grant before it; ";
    }
  }
  return errors;
}

// Whether an event's text or status contains `text` (the terminal wraps its columns).
bool Said(const boost::json::object& json, const std::string& text) {
  for (const auto& e : json.at("events").as_array()) {
    const auto& o = e.as_object();
    if ((Text(o, "event") + ": " + Text(o, "status")).find(text) != std::string::npos) return true;
  }
  return false;
}

// Each scenario in both arms: what it claims is what it did.
struct Arm {
  const char* scenario;
  bool fencing;
};

class DemoArmTest : public ::testing::TestWithParam<Arm> {};

TEST_P(DemoArmTest, RunsWithTheExpectedVerdictInCausalOrder) {
  const Arm arm = GetParam();
  TempDir dir;
  std::vector<std::string> args = {"--scenario", arm.scenario};
  if (!arm.fencing) args.push_back("--no-fencing");
  auto run = RunDemo(dir, args);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_FALSE(run.json.empty()) << run.out;
  EXPECT_TRUE(run.json.at("lesson_shown").as_bool());
  EXPECT_EQ(CausalOrderErrors(run.json), "") << run.out;
  const std::string scenario = arm.scenario;
  const std::string final_value = Text(run.json, "final_value");
  // A's and B's reads, each before its own write: a read-modify-write.
  for (const char* c : {"A", "B"}) {
    EXPECT_FALSE(EventsOf(run.json, c, {"read"}).empty()) << c << " never reads: " << run.out;
  }
  const auto a = Decisions(run.json, "A"), b = Decisions(run.json, "B");
  if (scenario == "lock-service-restart") {
    // A writes before the restart and after; B, the new lock service's holder, in between.
    ASSERT_EQ(a.size(), 2u) << run.out;
    ASSERT_EQ(b.size(), 1u) << run.out;
    EXPECT_EQ(a[0], "accepted");
    if (arm.fencing) {
      EXPECT_EQ(b[0], "refused") << "another lock service's token";
      EXPECT_EQ(a[1], "accepted");
      EXPECT_EQ(final_value, "balance 20 (A +10, A +10)");
      EXPECT_TRUE(Said(run.json, "another lock service (Fencing-Service)")) << run.out;
      EXPECT_NE(Text(run.json, "verdict").find("another lock service"), std::string::npos);
      // B holds the lock as far as the lock service knows: it is not drawn losing it.
      EXPECT_TRUE(EventsOf(run.json, "B", {"lost"}).empty()) << run.out;
    } else {
      EXPECT_EQ(b[0], "accepted");
      EXPECT_EQ(a[1], "overwrite") << "A's second write loses B's deposit";
      EXPECT_EQ(final_value, "balance 20 (A +10, A +10)");
    }
    // A's lease ends on the lock service's lane at the restart.
    bool a_lease_gone = false;
    for (const auto& e : EventsOf(run.json, "lock service", {"expire"})) {
      a_lease_gone |= Text(e, "event").starts_with("A's lease is gone");
    }
    EXPECT_TRUE(a_lease_gone) << run.out;
    return;
  }
  // Every other scenario: B writes, then A's stale write comes.
  ASSERT_EQ(b.size(), 1u) << run.out;
  ASSERT_EQ(a.size(), 1u) << run.out;
  EXPECT_EQ(b[0], "accepted");
  const bool stale_lands = !arm.fencing || scenario == "check-then-write";
  if (stale_lands) {
    EXPECT_EQ(a[0], "overwrite") << run.out;
    EXPECT_EQ(final_value, "balance 10 (A +10)") << "B's deposit is lost";
    EXPECT_TRUE(Said(run.json, "it overwrites B's update (token 2), which is lost")) << run.out;
  } else {
    EXPECT_EQ(a[0], "refused") << run.out;
    EXPECT_EQ(final_value, "balance 20 (B +20)");
  }
  if (scenario == "check-then-write") {
    // With the check on, both holders' checks pass; the pause falls between A's check and write.
    std::size_t checks = 0;
    for (const auto& e : EventsOf(run.json, "store", {"read"})) {
      checks += Text(e, "event").find("the highest token it has recorded") != std::string::npos;
    }
    EXPECT_EQ(checks, arm.fencing ? 2u : 0u) << run.out;
    EXPECT_EQ(Said(run.json, "checks its token against it: 1 >= 0: passes"), arm.fencing);
    EXPECT_EQ(Said(run.json, "checks its token against it: 2 >= 0: passes"), arm.fencing);
    const auto pause = EventsOf(run.json, "A", {"pause"});
    ASSERT_EQ(pause.size(), 1u);
    EXPECT_EQ(Text(pause[0], "event").find("after the check") != std::string::npos, arm.fencing);
    EXPECT_FALSE(run.json.at("fencing").as_bool()) << "its check is apart from the write";
  }
  if (scenario == "clock-jump") {
    // A's key on node 3 is deleted by the demo, and says so; each node's lane says who holds it.
    const auto deleted = EventsOf(run.json, "node 3", {"expire"});
    ASSERT_EQ(deleted.size(), 1u) << run.out;
    EXPECT_NE(Text(deleted[0], "event").find("simulated clock jump"), std::string::npos);
    for (int node = 1; node <= 5; ++node) {
      const auto holds = EventsOf(run.json, "node " + std::to_string(node), {"grant"});
      EXPECT_EQ(holds.size(), node == 3 ? 2u : 1u) << node;
    }
  }
  if (scenario == "slow-network") {
    // A sent its only write before B acquired; it arrives later, and A's lane says no
    // "writes" after it was sent.
    EXPECT_EQ(EventsOf(run.json, "store", {"arrive"}).size(), 1u) << run.out;
    for (const auto& e : EventsOf(run.json, "A", {"accepted", "refused", "overwrite"})) {
      EXPECT_EQ(Text(e, "event"), "gets the answer to its write");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, DemoArmTest,
    ::testing::Values(Arm{"gc-pause", true}, Arm{"gc-pause", false}, Arm{"slow-network", true},
                      Arm{"slow-network", false}, Arm{"lock-service-restart", true},
                      Arm{"lock-service-restart", false}, Arm{"clock-jump", true},
                      Arm{"clock-jump", false}, Arm{"check-then-write", true},
                      Arm{"check-then-write", false}),
    [](const ::testing::TestParamInfo<Arm>& info) {
      std::string name = std::string(info.param.scenario) + (info.param.fencing ? "" : "_no_fencing");
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(DemoTest, OnEtcdThePausedClientsOlderRevisionIsRefused) {
  testing::EtcdCluster etcd(1);
  TempDir dir;
  auto run = RunDemo(dir, {"--locks", etcd.uri()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(Decisions(run.json, "A"), std::vector<std::string>{"refused"});
  EXPECT_EQ(Decisions(run.json, "B"), std::vector<std::string>{"accepted"});
  EXPECT_EQ(Text(run.json, "final_value"), "balance 20 (B +20)");
}

// Both scenarios start their own Redis, so a --locks would be ignored: it is refused instead.
TEST(DemoTest, ScenariosWithTheirOwnRedisRefuseLocks) {
  for (const char* scenario : {"lock-service-restart", "clock-jump"}) {
    TempDir dir;
    auto run = RunDemo(dir, {"--scenario", scenario, "--locks", "redis://127.0.0.1:1"});
    EXPECT_EQ(run.exit_code, 2) << scenario;
    EXPECT_NE(run.err.find("takes no --locks"), std::string::npos) << run.err;
  }
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
  const std::vector<std::string> m =
      testing::Search(out, R"(-H 'Fencing-Token: (\d+)'   # accepted\n)");
  ASSERT_FALSE(m.empty()) << out;
  testing::RawConnection c(port);
  for (const std::string& token : {m[1], std::string("1")}) {
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

// Every scenario's timeline, in both arms, as the browser lays it out: every text inside the
// drawing (none clipped), no two overlapping, no leader line crossing a label, and a legend.
TEST(DemoHtmlTest, EveryScenariosTimelineIsLaidOutWithoutClipsOverlapsOrCrossings) {
  TempDir dir;
  testing::Chromium browser(dir.path(), 1400, 900);
  for (const char* scenario :
       {"gc-pause", "slow-network", "lock-service-restart", "clock-jump", "check-then-write"}) {
    for (bool fencing : {true, false}) {
      SCOPED_TRACE(std::string(scenario) + (fencing ? "" : " --no-fencing"));
      const std::string html = dir.File(std::string(scenario) + (fencing ? "" : "-off") + ".html");
      std::vector<std::string> args = {DEMO_BINARY, "--scenario", scenario, "--html", html,
                                        "--color", "never"};
      if (!fencing) args.push_back("--no-fencing");
      auto run = RunCommand(args);
      ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
      ASSERT_TRUE(browser.Open("file://" + html)) << browser.Log();
      EXPECT_EQ(browser.OverlappingTexts("svg text"), "");
      auto problems = browser.Evaluate(R"((() => {
        const out = [];
        const svg = document.querySelector('svg');
        const w = svg.width.baseVal.value, h = svg.height.baseVal.value;
        for (const t of svg.querySelectorAll('text')) {
          const b = t.getBBox();
          if (b.x < 0 || b.y < 0 || b.x + b.width > w || b.y + b.height > h) {
            out.push('clipped: ' + t.textContent);
          }
        }
        // A leader: the first line of an event's group, vertical from its label to its mark.
        const labels = [...svg.querySelectorAll('g.event, g.event.harm')].map(
            g => [g, g.querySelector('.label').getBBox()]);
        for (const [g, own] of labels) {
          const l = g.querySelector('line');
          const x = Number(l.getAttribute('x1'));
          const y1 = Number(l.getAttribute('y1')), y2 = Number(l.getAttribute('y2'));
          for (const [other, b] of labels) {
            if (other === g) continue;
            if (x > b.x && x < b.x + b.width && Math.max(y1, b.y) < Math.min(y2, b.y + b.height)) {
              out.push('the leader of "' + g.querySelector('.label').textContent +
                       '" crosses "' + other.querySelector('.label').textContent + '"');
            }
          }
        }
        if (document.querySelectorAll('ul.legend li').length < 3) out.push('no legend');
        return out.join('; ');
      })())");
      ASSERT_TRUE(problems && problems->is_string());
      EXPECT_EQ(problems->as_string(), "");
    }
  }
}

// --svg: the drawing alone, for slides: a standalone SVG file with large type.
TEST(DemoHtmlTest, SvgForSlidesIsTheDrawingAloneInLargeType) {
  TempDir dir;
  const std::string svg = dir.File("timeline.svg");
  auto run = RunCommand({DEMO_BINARY, "--svg", svg, "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string text = ReadFile(svg);
  EXPECT_TRUE(text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ")) << text;
  EXPECT_NE(text.find("font-size=\"22\""), std::string::npos);
  EXPECT_EQ(text.find("<html"), std::string::npos);
  EXPECT_NE(text.find(">Client A</text>"), std::string::npos);
  EXPECT_NE(text.find("refuses A's write, token 1: it has seen token 2"), std::string::npos);
  testing::Chromium browser(dir.path(), 1400, 900);
  ASSERT_TRUE(browser.Open("file://" + svg)) << browser.Log();
  EXPECT_EQ(browser.OverlappingTexts("text"), "");
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
  // Harm is drawn as harm: not green like a good write, and bold.
  auto harm = browser.Evaluate(
      "[...document.querySelectorAll('g.event.harm .label')].map(e => e.getAttribute('fill') + "
      "' ' + e.getAttribute('font-weight')).join('|')");
  ASSERT_TRUE(harm && harm->is_string());
  EXPECT_EQ(harm->as_string(), "#e8590c bold|#e8590c bold") << "A's write and its acceptance";
  std::string png = browser.Screenshot();
  EXPECT_GT(DistinctImageBytes(png), 32) << "the screenshot looks blank";
  testing::SaveScreenshot(png, "timeline-no-fencing.png");
}

}  // namespace
}  // namespace fencekit
