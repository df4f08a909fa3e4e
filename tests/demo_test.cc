// The GC-pause demo end to end (real fenced, real client processes, real SIGSTOP), judged by
// its JSON; and its HTML timeline rendered by headless Chromium.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "support/chromium.h"
#include "support/etcd_server.h"
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

TEST(DemoTest, UnknownScenarioIsAClearError) {
  TempDir dir;
  auto run = RunDemo(dir, {"--scenario", "meteor-strike"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("unknown scenario"), std::string::npos) << run.err;
}

TEST(DemoHtmlTest, TimelineRendersInHeadlessChromium) {
  TempDir dir;
  std::string html = dir.File("timeline.html"), png = dir.File("timeline.png");
  auto run = RunCommand({DEMO_BINARY, "--html", html, "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string page = Slurp(html);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"))
      << "the page must not load network resources";
  std::vector<std::string> chromium = {"chromium",
                                       "--headless",
                                       "--no-sandbox",
                                       "--disable-gpu",
                                       "--disable-quic",
                                       "--no-first-run",
                                       "--disable-background-networking",
                                       "--disable-component-update",
                                       "--disable-sync",
                                       "--user-data-dir=" + dir.File("profile"),
                                       "--window-size=1400,700"};
  auto dom_args = chromium;
  dom_args.push_back("--dump-dom");
  dom_args.push_back("file://" + html);
  auto dom = RunCommand(dom_args);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  for (const char* lane : {"Client A", "Client B", "Lock service", "Storage (fenced)"}) {
    EXPECT_NE(dom.out.find(std::string("class=\"lane-label\"")), std::string::npos);
    EXPECT_NE(dom.out.find(lane), std::string::npos) << lane;
  }
  EXPECT_NE(dom.out.find("class=\"pause\""), std::string::npos);
  EXPECT_NE(dom.out.find("409 Conflict"), std::string::npos);
  auto shot_args = chromium;
  shot_args.push_back("--screenshot=" + png);
  shot_args.push_back("file://" + html);
  auto shot = RunCommand(shot_args);
  ASSERT_EQ(shot.exit_code, 0) << shot.err;
  EXPECT_GT(DistinctImageBytes(Slurp(png)), 32) << "the screenshot looks blank";
}

}  // namespace
}  // namespace fencekit
