// GET /ui in headless Chromium against a real fenced process: the page is open first, then a
// write is accepted and a stale one refused, and the page draws both as they happen.
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <fstream>

#include "fencekit/httpapi/store_client.h"
#include "support/chromium.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::Chromium;
using testing::TempDir;

// How many elements of the page match `selector`.
std::string Count(const std::string& selector) {
  return "document.querySelectorAll('" + selector + "').length";
}

class UiTest : public testing::BrowserSuite<> {};

TEST_F(UiTest, ThePageDrawsAnAcceptedAndARefusedWriteAsTheyHappen) {
  TempDir dir;
  testing::FencedProcess fenced(dir.File("store.db"));
  Chromium& browser = this->browser();
  ASSERT_TRUE(browser.Open(fenced.url() + "/ui")) << browser.Log();
  ASSERT_TRUE(browser.WaitUntil("document.getElementById('status').dataset.state === 'live'", 20s))
      << browser.Log();
  EXPECT_EQ(browser.Evaluate(Count("#timeline .mark")), boost::json::value(0));

  auto store = StoreClient::Open(fenced.url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(7), "shared-record", "B").ok());
  auto stale = (*store)->Put("demo-lock", *FencingToken::FromInt(3), "shared-record", "A");
  ASSERT_TRUE(stale.status().IsStaleToken()) << stale.status().ToString();
  // A key that would be markup if the page inserted text as HTML.
  const std::string markup = "<b id=injected>x</b>";
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(7), markup, "C").ok());

  ASSERT_TRUE(browser.WaitUntil(Count("#timeline .mark.accepted") + " === 2 && " +
                                    Count("#timeline .mark.refused") + " === 1",
                                10s))
      << boost::json::serialize(browser.Evaluate("document.body.innerText").value_or(nullptr));
  // One lane per holder: token 7 and token 3 of demo-lock.
  auto lanes = browser.Evaluate(
      "[...document.querySelectorAll('#timeline .lane-label')].map(e => e.firstChild.textContent)");
  ASSERT_TRUE(lanes && lanes->is_array());
  ASSERT_EQ(lanes->as_array().size(), 2u) << boost::json::serialize(*lanes);
  EXPECT_EQ(lanes->as_array()[0].as_string(), "lock demo-lock \u00b7 token 3");
  EXPECT_EQ(lanes->as_array()[1].as_string(), "lock demo-lock \u00b7 token 7");
  auto refused =
      browser.Evaluate("document.querySelector('#timeline .mark.refused title').textContent");
  ASSERT_TRUE(refused && refused->is_string());
  std::string why(refused->as_string());
  EXPECT_NE(why.find("refused (stale_token); highest token now 7"), std::string::npos) << why;
  EXPECT_EQ(browser.Evaluate(Count("#log tbody tr.refused")), boost::json::value(1));
  // The markup key is text on the page, not an element.
  EXPECT_EQ(browser.Evaluate("document.getElementById('injected') === null"),
            boost::json::value(true));
  EXPECT_EQ(browser.Evaluate("[...document.querySelectorAll('#timeline .mark-label')]"
                             ".some(e => e.textContent === '" +
                             markup + "')"),
            boost::json::value(true));

  EXPECT_EQ(browser.Evaluate("document.getElementById('fencing').hidden"), boost::json::value(true))
      << "a refusing fenced is not called unfenced";

  std::string png = browser.Screenshot();
  ASSERT_FALSE(png.empty());
  EXPECT_GT(testing::DistinctImageBytes(png), 32) << "the screenshot looks blank";
}

// fenced --no-fencing (fencekit-demo --no-fencing runs one): once it accepts a token below one it
// accepted, the page says fencing is off, and its curl hints no longer promise a refusal.
TEST_F(UiTest, ThePageSaysFencingIsOffWhenAStaleTokenIsAccepted) {
  TempDir dir;
  testing::FencedProcess fenced(dir.File("store.db"), {"--no-fencing"});
  Chromium& browser = this->browser();
  ASSERT_TRUE(browser.Open(fenced.url() + "/ui")) << browser.Log();
  ASSERT_TRUE(browser.WaitUntil("document.getElementById('status').dataset.state === 'live'", 20s))
      << browser.Log();
  auto store = StoreClient::Open(fenced.url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(7), "shared-record", "B").ok());
  ASSERT_TRUE(browser.WaitUntil(Count("#timeline .mark.accepted") + " === 1", 10s));
  EXPECT_EQ(browser.Evaluate("document.getElementById('fencing').hidden"),
            boost::json::value(true));
  ASSERT_TRUE((*store)->Put("demo-lock", *FencingToken::FromInt(3), "shared-record", "A").ok());
  ASSERT_TRUE(browser.WaitUntil("!document.getElementById('fencing').hidden", 10s))
      << boost::json::serialize(browser.Evaluate("document.body.innerText").value_or(nullptr));
  auto said = browser.Evaluate("document.getElementById('fencing').textContent");
  ASSERT_TRUE(said && said->is_string());
  const std::string text(said->as_string());
  EXPECT_NE(text.find("Fencing is OFF on this fenced: it accepted token 3 of lock demo-lock after "
                      "token 7"),
            std::string::npos)
      << text;
  auto hints = browser.Evaluate("document.getElementById('try').textContent");
  ASSERT_TRUE(hints && hints->is_string());
  EXPECT_EQ(std::string(hints->as_string()).find("a refused one"), std::string::npos);
}

TEST_F(UiTest, UnderAuthThePageAsksForATokenAndThenShowsWhatItMayRead) {
  TempDir dir;
  std::string auth = dir.File("auth.json");
  // "t" may read k/ (digest: printf %s t | sha256sum).
  std::ofstream(auth) << R"({"principals": [{"name": "user", "read": ["k/"], "write": ["k/"],
      "token_sha256": "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"}]})";
  testing::FencedProcess fenced(dir.File("store.db"), {"--auth", auth});
  Chromium& browser = this->browser();
  ASSERT_TRUE(browser.Open(fenced.url() + "/ui")) << browser.Log();
  ASSERT_TRUE(
      browser.WaitUntil("document.getElementById('status').dataset.state === 'unauthorized' && "
                        "!document.getElementById('auth').hidden",
                        20s));
  ASSERT_TRUE(
      browser.Evaluate("document.getElementById('token').value = 't';"
                       "document.querySelector('#auth button').click(); true"));
  ASSERT_TRUE(browser.WaitUntil("document.getElementById('status').dataset.state === 'live'", 10s));
  auto store = StoreClient::Open(fenced.url(), {.bearer_token = "t"});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Put("k/lock", *FencingToken::FromInt(2), "k/1", "v").ok());
  ASSERT_TRUE(browser.WaitUntil(Count("#timeline .mark.accepted") + " === 1", 10s));
}

}  // namespace
}  // namespace fencekit
