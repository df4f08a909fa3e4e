// fencekit-demo --serve's page in headless Chromium, against the real demo (real fenced, real
// SQLite lock service, real client processes, a real SIGSTOP): loaded during the pause, opened
// again in the middle of it, at the end, after a reload, and after the visitor's own writes.
// The screenshots docs/tutorial.md shows come from here (FENCEKIT_SCREENSHOTS, chromium.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/value.hpp>
#include <memory>

#include "fencekit/httpapi/store_client.h"
#include "support/chromium.h"
#include "support/servers/serving_demo.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::Chromium;
using testing::ServingDemo;
using testing::TempDir;

double Number(Chromium& browser, const std::string& expression) {
  auto v = browser.Evaluate(expression);
  return v && v->is_number() ? v->to_number<double>() : -1;
}

bool Has(const std::vector<std::string>& texts, const std::string& text) {
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

// The drawing shows the scenario's end (story.js sets its state once drawn).
const std::string kEnded = "document.getElementById('story').dataset.state === 'ended'";
const std::string kPauseOpen = "document.querySelector('#story rect.pause[data-open=true]')";

class DemoPageTest : public testing::BrowserSuite<1400, 1000> {
 protected:
  // Starts fencekit-demo --serve with `args` and watches its page to the end of the scenario;
  // null after a failure.
  std::unique_ptr<ServingDemo> WatchToTheEnd(const TempDir& dir, std::vector<std::string> args) {
    auto s = std::make_unique<ServingDemo>(DEMO_BINARY, dir, std::move(args));
    if (!s->started()) return nullptr;
    if (!browser().Open(s->page_url()) || !browser().WaitUntil(kEnded, 30s)) {
      ADD_FAILURE() << "the page did not show the end: " << s->Output() << browser().Log();
      return nullptr;
    }
    return s;
  }
};

TEST_F(DemoPageTest, TheStoryIsToldLiveAndAPageOpenedLaterOrReloadedSeesItAll) {
  TempDir dir;
  ServingDemo s(DEMO_BINARY, dir, {"--ttl", "3s"});
  ASSERT_TRUE(s.started());
  Chromium& browser = this->browser();

  // Opening the page starts the scenario: A takes the lock and is frozen.
  ASSERT_TRUE(browser.Open(s.page_url())) << browser.Log();
  ASSERT_TRUE(browser.WaitUntil(kPauseOpen + " !== null", 20s)) << s.Output();
  EXPECT_EQ(browser.Texts("#titles .lane-title"),
            (std::vector<std::string>{"Client A", "Client B", "Lock service", "Storage (fenced)"}));

  // A second page, opened in the middle of the pause, is replayed what happened so far and
  // goes on live: the pause is a bar that grows while it lasts.
  ASSERT_TRUE(browser.Open(s.page_url())) << browser.Log();
  ASSERT_TRUE(browser.WaitUntil(kPauseOpen + " !== null", 10s)) << "opened too late to test";
  auto labels = browser.Texts("#story text.label");
  EXPECT_TRUE(Has(labels, "grants the lock to A, token 1")) << ::testing::PrintToString(labels);
  EXPECT_TRUE(Has(labels, "stop-the-world pause (SIGSTOP) before it writes its +10"));
  EXPECT_EQ(browser.Evaluate("document.getElementById('status').dataset.state"),
            boost::json::value("running"));
  const double width = Number(browser, kPauseOpen + ".width.baseVal.value");
  const double ms = Number(browser, "Number(" + kPauseOpen + ".dataset.ms)");
  // Half a second on, and still in the pause (the lease is 3 s).
  ASSERT_TRUE(browser.WaitUntil("(p => p === null || Number(p.dataset.ms) >= " +
                                    std::to_string(ms + 500) + ")(" + kPauseOpen + ")",
                                10s));
  EXPECT_GT(Number(browser, kPauseOpen + ".width.baseVal.value"), width + 20)
      << "the pause bar grows while the pause lasts";
  testing::SaveScreenshot(browser.Screenshot(), "live-pause.png");

  // The end: every lane, every mark, the refusal said once.
  ASSERT_TRUE(browser.WaitUntil(kEnded, 30s)) << s.Output();
  labels = browser.Texts("#story text.label");
  for (const char* label :
       {"grants the lock to A, token 1", "lease of A expires, token 1",
        "grants the lock to B, token 2", "accepts B's write, token 2: \"balance 20 (B +20)\"",
        "refuses A's write, token 1: it has seen token 2", "writes", "learns its lease is lost"}) {
    EXPECT_TRUE(Has(labels, label)) << label << " in " << ::testing::PrintToString(labels);
  }
  EXPECT_EQ(std::count_if(labels.begin(), labels.end(),
                          [](const std::string& l) { return l.find("refuse") != l.npos; }),
            1);
  EXPECT_EQ(Number(browser,
                   "document.querySelectorAll('#story g.mark.kind-refused[data-lane=store]')"
                   ".length"),
            1);
  EXPECT_EQ(Number(browser, "document.querySelectorAll('#story rect.lease').length"), 2);
  EXPECT_EQ(Number(browser, "document.querySelectorAll('#story rect.lease-expired').length"), 1);
  EXPECT_GE(Number(browser, "Number(document.querySelector('#story rect.pause').dataset.ms)"),
            2900);
  // The write A sends and the store's refusal of it are one moment: one x.
  EXPECT_EQ(Number(browser,
                   "Number(document.querySelector(\"#story g.mark.kind-refused\")"
                   ".dataset.x)"),
            Number(browser,
                   "Number([...document.querySelectorAll(\"#story g.mark[data-lane=A]\")]"
                   ".pop().dataset.x)"));
  EXPECT_EQ(browser.OverlappingTexts("#story text"), "");
  // It uses the window's width: the last mark stands in its right half.
  EXPECT_GT(Number(browser,
                   "Math.max(...[...document.querySelectorAll('#story g.mark')]"
                   ".map(g => Number(g.dataset.x))) / "
                   "document.getElementById('scroller').clientWidth"),
            0.6);
  auto verdict = browser.Texts("#verdict");
  ASSERT_EQ(verdict.size(), 1u);
  EXPECT_EQ(verdict[0],
            "Verdict: stale write refused: A was paused past its lease, but the store refused its "
            "token 1 (it had seen 2) and kept B's deposit: \"balance 20 (B +20)\". The record now "
            "holds \"balance 20 (B +20)\".");
  testing::SaveScreenshot(browser.Screenshot(), "live-fencing.png");

  // A reload shows the same story.
  ASSERT_TRUE(browser.Reload());
  ASSERT_TRUE(browser.WaitUntil(kEnded +
                                    " && document.querySelectorAll('#story text.label')"
                                    ".length === " +
                                    std::to_string(labels.size()),
                                20s))
      << ::testing::PrintToString(browser.Texts("#story text.label")) << " "
      << ::testing::PrintToString(browser.Texts("#status"));
  EXPECT_EQ(browser.Texts("#story text.label"), labels);

  // The visitor's own writes, in the same lanes; a key that would be markup stays text.
  auto commands = browser.Texts("#commands");
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_NE(commands[0].find("-H 'Fencing-Token: 7' --data mine http://127.0.0.1:" +
                             std::to_string(s.fenced_port()) + "/v1/objects/shared-record"),
            std::string::npos)
      << commands[0];
  auto store = StoreClient::Open("http://127.0.0.1:" + std::to_string(s.fenced_port()));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(7), "shared-record", "mine").ok());
  auto stale = (*store)->Put("demo-lock", *FencingToken::FromInt(1), "shared-record", "old");
  EXPECT_TRUE(stale.status().IsStaleToken()) << stale.status().ToString();
  const std::string markup = "<img src=x id=injected>";
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(8), markup, "x").ok());
  ASSERT_TRUE(browser.WaitUntil(
      "document.querySelectorAll('#story g.mark.after[data-lane=store]').length === 3", 10s));
  labels = browser.Texts("#story text.label.after");
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "accepts a write to shared-record, token 7",
                        "refuses a write to shared-record, token 1: it has seen token 7",
                        "accepts a write to " + markup + ", token 8"}));
  EXPECT_EQ(browser.Evaluate("document.getElementById('injected') === null"),
            boost::json::value(true));
  // The verdict no longer says the record holds the scenario's value: the visitor's own write
  // to it replaced it (the write to another key did not).
  verdict = browser.Texts("#verdict");
  ASSERT_EQ(verdict.size(), 1u);
  EXPECT_NE(verdict[0].find("At the end of the scenario the record held \"balance 20 (B +20)\". "
                            "Since then, your own writes: 1 accepted, 1 refused; the record now "
                            "holds your latest accepted one (token 7)."),
            std::string::npos)
      << verdict[0];
  EXPECT_EQ(browser.OverlappingTexts("#story text"), "");
  testing::SaveScreenshot(browser.Screenshot(), "live-your-writes.png");
  EXPECT_TRUE(s.Interrupt());
}

TEST_F(DemoPageTest, WithoutFencingABannerSaysSoAndTheLostUpdateIsSpelledOut) {
  TempDir dir;
  auto s = WatchToTheEnd(dir, {"--no-fencing", "--ttl", "500ms"});
  ASSERT_TRUE(s);
  Chromium& browser = this->browser();
  auto banner = browser.Texts("#banner:not([hidden])");
  ASSERT_EQ(banner.size(), 1u);
  EXPECT_EQ(banner[0].find("Fencing is OFF in this run (--no-fencing)"), 0u) << banner[0];
  EXPECT_EQ(browser.Texts("#titles .lane-title").back(), "Storage (no fencing)");
  auto labels = browser.Texts("#story text.label");
  EXPECT_TRUE(Has(labels,
                  "accepts A's write, token 1: it overwrites B's update (token 2), which "
                  "is lost"))
      << ::testing::PrintToString(labels);
  EXPECT_EQ(browser.Evaluate("document.getElementById('verdict').dataset.ok"),
            boost::json::value("false"));
  EXPECT_NE(browser.Texts("#verdict")[0].find("lost update"), std::string::npos);
  EXPECT_NE(browser.Texts("#commands")[0].find("# accepted too: this store does not check"),
            std::string::npos);
  EXPECT_EQ(browser.OverlappingTexts("#story text"), "");
  testing::SaveScreenshot(browser.Screenshot(), "live-no-fencing.png");
  EXPECT_TRUE(s->Interrupt());
}

// slow-network: A is not paused; its write is held in the network past its lease, and the page
// draws the hold as it draws a pause.
TEST_F(DemoPageTest, AWriteHeldInTheNetworkIsDrawnAsLongAsItIsHeld) {
  TempDir dir;
  auto s = WatchToTheEnd(dir, {"--scenario", "slow-network", "--ttl", "500ms"});
  ASSERT_TRUE(s);
  Chromium& browser = this->browser();
  auto held = browser.Texts("#story .pause-label");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].find("held in the network "), 0u) << held[0];
  EXPECT_GE(Number(browser, "Number(document.querySelector('#story rect.pause').dataset.ms)"), 400);
  EXPECT_TRUE(
      Has(browser.Texts("#story text.label"), "refuses A's write, token 1: it has seen token 2"));
  EXPECT_EQ(browser.OverlappingTexts("#story text"), "");
  EXPECT_TRUE(s->Interrupt());
}

}  // namespace
}  // namespace fencekit
