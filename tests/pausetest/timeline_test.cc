// The timeline: its time axis is proportional with breaks across long waits, and its labels are
// stacked so that none overlaps another; the demo's four lanes, or any lanes (a pause-test run's
// workers) (fencekit/timeline/timeline.h).
#include "fencekit/timeline/timeline.h"

#include <gtest/gtest.h>

#include <chrono>

#include "support/matching.h"

namespace fencekit::timeline {
namespace {

std::size_t Occurrences(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(TimelineAxisTest, DistancesAreProportionalToTimeBetweenBreaks) {
  // 40 ms and 60 ms apart, then a wait of 1,013 ms.
  auto axis = LayOutTime({0, 40, 100, 1113}, 200);
  ASSERT_EQ(axis.x.size(), 4u);
  EXPECT_EQ(axis.x[0], 200);
  EXPECT_EQ(axis.x[1] - axis.x[0], static_cast<int>(40 * TimeAxis::kPxPerMs));
  EXPECT_EQ(axis.x[2] - axis.x[1], static_cast<int>(60 * TimeAxis::kPxPerMs));
  ASSERT_EQ(axis.breaks.size(), 1u);
  EXPECT_EQ(axis.breaks[0].ms, 1013);
  EXPECT_GT(axis.breaks[0].x, axis.x[2]);
  EXPECT_LT(axis.breaks[0].x + TimeAxis::kBreakWidth, axis.x[3]);
  EXPECT_EQ(axis.x[3] - axis.x[2], TimeAxis::kMinStep + TimeAxis::kBreakWidth)
      << "the wait is drawn as a fixed break, not 6,078 px";
  EXPECT_EQ(axis.end, axis.x[3]);
}

TEST(TimelineAxisTest, EventsCloseInTimeKeepTheirDistanceAndOrder) {
  auto axis = LayOutTime({14, 15, 16, 1014, 1015}, 0);
  for (std::size_t i = 1; i < axis.x.size(); ++i) {
    EXPECT_GE(axis.x[i] - axis.x[i - 1], TimeAxis::kMinStep) << i;
  }
  ASSERT_EQ(axis.breaks.size(), 1u);
  EXPECT_EQ(axis.breaks[0].ms, 998);
  EXPECT_TRUE(LayOutTime({}, 0).x.empty());
}

// A grant and the acquisition it answers, a write and the store's answer: one moment, one x.
TEST(TimelineAxisTest, EventsAtTheSameTimeShareTheirPlace) {
  auto axis = LayOutTime({14, 14, 15, 1013, 1013, 1013}, 0);
  EXPECT_EQ(axis.x[0], axis.x[1]);
  EXPECT_GE(axis.x[2] - axis.x[1], TimeAxis::kMinStep);
  EXPECT_EQ(axis.x[3], axis.x[4]);
  EXPECT_EQ(axis.x[4], axis.x[5]);
  ASSERT_EQ(axis.breaks.size(), 1u) << "one wait, however many events end it";
  EXPECT_EQ(axis.end, axis.x[5]);
}

TEST(TimelineLabelsTest, EachThingIsSaidOnceOnTheLaneThatDoesIt) {
  const Event refusal{1020, "store", "refuses A's write", 1, "it has seen token 2", Kind::kRefused};
  const Event write{1020, "A", "writes", 1, "refused, stale token", Kind::kRefused};
  EXPECT_EQ(Label(refusal), "refuses A's write, token 1: it has seen token 2");
  EXPECT_EQ(Label(write), "writes") << "the store's lane says with which token and what became";
  EXPECT_EQ(Label({14, "lock service", "grants the lock to A", 1, "", Kind::kGrant}),
            "grants the lock to A, token 1");
  EXPECT_EQ(Label({14, "A", "acquires the lock", 1, "", Kind::kGrant}), "acquires the lock");
  EXPECT_EQ(Label({1017, "B", "reads back \"B's update (token 2)\"", 2, "", Kind::kRead}),
            "reads back \"B's update (token 2)\"");
  EXPECT_EQ(LaneTitle("store", true), "Storage (fenced)");
  EXPECT_EQ(LaneTitle("store", false), "Storage (no fencing)");
}

TEST(TimelineLabelsTest, OverlappingLabelsGoToNewRowsAndFreeRowsAreReused) {
  // [0,100) [40,90) [95,150) [120,200) [300,310)
  auto rows = StackLabels({{0, 100}, {40, 90}, {95, 150}, {120, 200}, {300, 310}}, 8);
  EXPECT_EQ(rows, (std::vector<int>{0, 1, 2, 0, 0}));
}

// Labels of one moment stack top-down in time order: the first is on top.
TEST(TimelineLabelsTest, LabelsOfOneMomentReadTopDown) {
  auto rows = PlaceLabels({100, 100, 100}, {80, 80, 80}, 8);
  EXPECT_EQ(rows, (std::vector<int>{2, 1, 0}));
}

// A label whose text would lie across a later label's leader line goes above that label; one
// clear of every leader stays on the lane's line.
TEST(TimelineLabelsTest, NoLeaderLineCrossesALabel) {
  // 0: spans [3, 203): over the leaders of 1 (x 50) and 2 (x 150). 3: far to the right.
  const std::vector<int> xs = {0, 50, 150, 400}, widths = {200, 40, 40, 40};
  auto rows = PlaceLabels(xs, widths, 8);
  EXPECT_EQ(rows[1], 0);
  EXPECT_EQ(rows[2], 0);
  EXPECT_EQ(rows[3], 0);
  EXPECT_GT(rows[0], 0);
  // For every pair: a leader (from its label's row down to the line) crosses no label below it.
  for (std::size_t i = 0; i < xs.size(); ++i) {
    for (std::size_t j = 0; j < xs.size(); ++j) {
      if (i == j || rows[j] >= rows[i]) continue;
      const int from = xs[j] + kLabelOffset, to = from + widths[j];
      EXPECT_FALSE(xs[i] >= from && xs[i] < to) << i << " crosses " << j;
    }
  }
  // Labels of a row never overlap.
  auto apart = PlaceLabels({0, 10, 20, 30}, {100, 100, 100, 100}, 8);
  EXPECT_EQ(apart, (std::vector<int>{3, 2, 1, 0}));
}

TEST(TimelineHtmlTest, TheFileHasABreakLabelledWithThePauseAndNoRotatedLabels) {
  Timeline t;
  t.scenario = "gc-pause";
  t.events = {{14, "A", "acquires the lock", 1, "", Kind::kGrant},
              {14, "A", "begins its work (read-modify-write)", 1, "", Kind::kNote},
              {14, "A", "stop-the-world pause (SIGSTOP)", 1, "", Kind::kPause},
              {1013, "lock service", "lease of A expires", 1, "", Kind::kExpire, "A"},
              {1030, "A", "resumes (SIGCONT)", 1, "", Kind::kResume}};
  std::string html = RenderHtml(t);
  EXPECT_NE(html.find("class=\"axis-break\""), std::string::npos);
  EXPECT_NE(html.find(">999 ms</text>"), std::string::npos) << html;
  EXPECT_NE(html.find("paused 1,016 ms"), std::string::npos);
  // The legend says what the break is and why the pause is longer than it.
  EXPECT_NE(html.find("<ul class=\"legend\">"), std::string::npos);
  EXPECT_NE(html.find("here the pause, 1,016 ms, also covers the 17 ms around the longest break, "
                      "999 ms"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("rotate(-"), std::string::npos);
  EXPECT_NE(html.find(">Storage (fenced)</text>"), std::string::npos);
  // Three events of A at 14 ms: one place (the first event's x, 190), one time under the lane.
  EXPECT_EQ(Occurrences(html, ">14 ms</text>"), 1u) << html;
  EXPECT_EQ(Occurrences(html, "<circle cx=\"190\""), 3u) << html;
}

// The drawing is as wide as its longest label needs: nothing is cut at its right edge.
TEST(TimelineHtmlTest, TheDrawingIsAsWideAsItsLongestLabel) {
  Timeline t;
  t.scenario = "gc-pause";
  const std::string long_status(300, 'x');
  t.events = {{14, "store", "accepts A's write", 1, long_status, Kind::kOverwrite}};
  const std::string html = RenderHtml(t);
  const std::vector<std::string> m =
      testing::Search(html, "<svg xmlns=\"[^\"]+\" width=\"([0-9]+)\"");
  ASSERT_FALSE(m.empty());
  // 190 (the event's x) + the label's estimated width (6.8 px a character).
  EXPECT_GT(std::stoi(m[1]), 190 + static_cast<int>(318 * 6.8)) << m[1];
  EXPECT_NE(html.find("class=\"event harm\""), std::string::npos);
  EXPECT_NE(html.find("harm: a write the store accepted although it overwrote a newer one"),
            std::string::npos);
}

// A write held in the network is drawn from its sending to its arrival at the store.
TEST(TimelineHtmlTest, AHeldWriteIsABarFromItsSendingToItsArrival) {
  Timeline t;
  t.scenario = "slow-network";
  t.events = {{10, "A", "sends its write", 1, "held in the network", Kind::kSend},
              {1010, "store", "A's write arrives", 1, "held 1000 ms", Kind::kArrive, "A"}};
  const std::string html = RenderHtml(t);
  EXPECT_NE(html.find("<rect class=\"hold\""), std::string::npos) << html;
  EXPECT_NE(html.find("held in the network 1,000 ms"), std::string::npos) << html;
  EXPECT_NE(RenderJson(t).find("\"kind\":\"arrive\""), std::string::npos);
}

TEST(TimelineHtmlTest, AStoreWithoutFencingIsNotCalledFenced) {
  Timeline t;
  t.scenario = "gc-pause";
  t.fencing = false;
  t.events = {{14, "store", "accepts A's write", 1, "", Kind::kAccepted}};
  std::string html = RenderHtml(t);
  EXPECT_EQ(html.find("Storage (fenced)"), std::string::npos) << html;
  EXPECT_NE(html.find(">Storage (no fencing)</text>"), std::string::npos);
  EXPECT_NE(RenderTerminal(t, false).find("Storage (no fencing)"), std::string::npos);
}

// A pause-test run's timeline: a lane per worker and the lock service.
Timeline WorkerTimeline() {
  Timeline t;
  t.title = "pause test: run 7 (seed 42)";
  t.lanes = {{"worker 0", "Worker 0", true},
             {"worker 1", "Worker 1", true},
             {"lock service", "Lock service", false}};
  return t;
}

TEST(TimelineCustomLanesTest, LanesKeepTheirTitlesAndOrder) {
  Timeline t = WorkerTimeline();
  t.events = {{5, "lock service", "grants the lock to worker 1", 3, "", Kind::kGrant},
              {6, "worker 1", "writes k", 3, "", Kind::kAccepted},
              {7, "worker 0", "exits (killed)", std::nullopt, "", Kind::kNote}};
  std::string html = RenderHtml(t);
  auto w0 = html.find(">Worker 0</text>"), w1 = html.find(">Worker 1</text>"),
       lock = html.find(">Lock service</text>");
  ASSERT_NE(w0, std::string::npos) << html;
  ASSERT_NE(w1, std::string::npos);
  ASSERT_NE(lock, std::string::npos);
  EXPECT_LT(w0, w1);
  EXPECT_LT(w1, lock);
  EXPECT_EQ(html.find("Storage"), std::string::npos) << "no demo lane";
  EXPECT_EQ(html.find("Client A"), std::string::npos);
  // A worker is a client: its write names no token; the lock service's grant does.
  EXPECT_NE(html.find(">writes k</text>"), std::string::npos);
  EXPECT_NE(html.find(">grants the lock to worker 1, token 3</text>"), std::string::npos);

  std::string text = RenderTerminal(t, false);
  auto header = text.substr(0, text.find('\n'));
  EXPECT_LT(header.find("Worker 0"), header.find("Worker 1")) << text;
  EXPECT_LT(header.find("Worker 1"), header.find("Lock service")) << text;
  // The worker 0 column is the first after the time.
  EXPECT_NE(text.find("7ms     exits (killed)"), std::string::npos) << text;

  std::string json = RenderJson(t);
  EXPECT_NE(json.find("\"lanes\":[{\"id\":\"worker 0\",\"title\":\"Worker 0\",\"client\":true}"),
            std::string::npos)
      << json;
}

TEST(TimelineCustomLanesTest, EventsOnNoLaneAreLeftOutOfTheDrawings) {
  Timeline t = WorkerTimeline();
  t.events = {{5, "worker 0", "reads k", std::nullopt, "", Kind::kRead},
              {6, "store", "accepts a write", 4, "", Kind::kAccepted}};
  EXPECT_EQ(RenderHtml(t).find("accepts a write"), std::string::npos);
  EXPECT_EQ(RenderTerminal(t, false).find("accepts a write"), std::string::npos);
  EXPECT_NE(RenderJson(t).find("accepts a write"), std::string::npos) << "the data keeps it";
}

TEST(TimelineCustomLanesTest, AWorkersLeaseBarEndsWhereTheLockServiceExpiresIt) {
  Timeline t = WorkerTimeline();
  t.events = {{10, "worker 1", "acquires the lock", 4, "", Kind::kGrant},
              {20, "worker 1", "paused", std::nullopt, "", Kind::kPause},
              {30, "lock service", "lease of worker 1 expires", 4, "", Kind::kExpire, "worker 1"},
              {40, "worker 1", "resumed", std::nullopt, "", Kind::kResume},
              {45, "worker 1", "writes k", 4, "timed out", Kind::kUnknown}};
  auto axis = LayOutTime({10, 20, 30, 40, 45}, 190);
  std::string html = RenderHtml(t);
  auto at = html.find("<rect class=\"lease\"");
  ASSERT_NE(at, std::string::npos) << html;
  EXPECT_EQ(html.find("<rect class=\"lease\"", at + 1), std::string::npos) << "one lease bar";
  std::string bar = html.substr(at, html.find("</text>", at) - at);
  EXPECT_NE(bar.find("x=\"" + std::to_string(axis.x[0]) + "\""), std::string::npos) << bar;
  EXPECT_NE(bar.find("width=\"" + std::to_string(axis.x[2] - axis.x[0]) + "\""), std::string::npos)
      << bar;
  EXPECT_NE(bar.find(">lease, token 4"), std::string::npos) << bar;
  // The bar is on worker 1's lane: above its line, which is the second lane's.
  auto line_at = [&](int lane) {
    std::size_t from = 0;
    for (int i = 0; i <= lane; ++i) from = html.find("<line x1=\"170\" y1=\"", from) + 1;
    return std::stoi(html.substr(from - 1 + 19));
  };
  EXPECT_EQ(bar.find("y=\"" + std::to_string(line_at(1) - 16) + "\""), bar.find("y=\"")) << bar;
  EXPECT_NE(html.find("class=\"pause\""), std::string::npos);
  EXPECT_NE(html.find("fill=\"#999\">writes k: timed out</text>"), std::string::npos)
      << "an unknown outcome is grey and says why";
}

TEST(TimelineCustomLanesTest, AReleaseEndsTheLeaseBarAndTheNextGrantStartsAnother) {
  Timeline t = WorkerTimeline();
  t.events = {{10, "worker 0", "acquires", 4, "", Kind::kGrant},
              {20, "worker 0", "releases", std::nullopt, "", Kind::kRelease},
              {30, "worker 0", "acquires", 6, "", Kind::kGrant},
              {40, "worker 0", "releases", std::nullopt, "", Kind::kRelease}};
  auto axis = LayOutTime({10, 20, 30, 40}, 190);
  std::string html = RenderHtml(t);
  auto first = html.find("<rect class=\"lease\"");
  ASSERT_NE(first, std::string::npos) << html;
  auto second = html.find("<rect class=\"lease\"", first + 1);
  ASSERT_NE(second, std::string::npos) << "two bars, not one from the first grant" << html;
  EXPECT_NE(html.find("width=\"" + std::to_string(axis.x[1] - axis.x[0]) + "\"", first),
            std::string::npos);
  EXPECT_NE(html.find(">lease, token 6", second), std::string::npos);
}

TEST(TimelineCustomLanesTest, FlaggedEventsAreRingedAndExplained) {
  Timeline t = WorkerTimeline();
  t.events = {{10, "worker 0", "writes k=1", 4, "", Kind::kAccepted, "", true},
              {12, "worker 1", "reads k", std::nullopt, "", Kind::kRead},
              {14, "worker 1", "writes k=2", 5, "", Kind::kAccepted, "", true}};
  std::string html = RenderHtml(t);
  EXPECT_EQ(Occurrences(html, "<g class=\"event flagged\""), 2u) << html;
  // The first flagged (in time) is the one the page opens scrolled to.
  EXPECT_EQ(Occurrences(html, "<g class=\"event flagged\" id=\"first-flagged\">"), 1u) << html;
  EXPECT_LT(html.find("first-flagged"), html.find("writes k=1"));
  EXPECT_NE(html.find("<div id=\"drawing\">"), std::string::npos);
  EXPECT_EQ(Occurrences(html, "class=\"flag-ring\""), 2u);
  EXPECT_EQ(Occurrences(html, "<g class=\"event\">"), 1u);
  EXPECT_NE(html.find("font-weight=\"bold\">writes k=1</text>"), std::string::npos) << html;
  EXPECT_NE(html.find("Circled in red: the operations the check named."), std::string::npos);
  t.flagged_legend = "circled: the operations the check could not order";
  EXPECT_NE(RenderHtml(t).find("circled: the operations the check could not order"),
            std::string::npos);
  EXPECT_NE(RenderJson(t).find("\"flagged\":true"), std::string::npos);

  for (auto& e : t.events) e.flagged = false;
  html = RenderHtml(t);
  EXPECT_EQ(html.find("flag"), std::string::npos) << "no legend without a flagged event";
  EXPECT_EQ(RenderJson(t).find("flagged"), std::string::npos);
}

TEST(TimelineCustomLanesTest, AnEventWithAnEndIsABarAsLongAsItTook) {
  Timeline t = WorkerTimeline();
  t.events = {{10, "worker 0", "read k = 1", std::nullopt, "", Kind::kAccepted},
              {20, "worker 1", "write k := 2", std::nullopt, "", Kind::kUnknown},
              {30, "worker 0", "releases", std::nullopt, "", Kind::kRelease}};
  t.events[0].end_ms = 20;  // ends at the next event's moment
  t.events[1].end_ms = 25;  // halfway between two events
  const std::string html = RenderHtml(t);
  std::vector<std::pair<int, int>> bars;  // x, width
  const std::string rect = "<rect class=\"op\" x=\"([0-9]+)\" y=\"[0-9]+\" width=\"([0-9]+)\"";
  for (const auto& match : testing::SearchAll(html, rect)) {
    bars.emplace_back(std::stoi(match[1]), std::stoi(match[2]));
  }
  ASSERT_EQ(bars.size(), 2u) << html;
  // The first ends where the second starts; the second ends halfway to the third event.
  EXPECT_EQ(bars[0].first + bars[0].second, bars[1].first) << html;
  const TimeAxis axis = LayOutTime({10, 20, 30}, 0);
  EXPECT_NEAR(bars[1].second, (axis.x[2] - axis.x[1]) / 2, 1) << html;
  EXPECT_NE(html.find("fill=\"#999\"/>"), std::string::npos);  // unknown: grey
  EXPECT_EQ(html.find("id=\"drawing\""), std::string::npos) << "nothing flagged: no scrolling";
}

TEST(TimelineCustomLanesTest, ATableIsShownAboveTheDrawingEscaped) {
  Timeline t = WorkerTimeline();
  t.events = {{10, "worker 0", "read k = 1", std::nullopt, "", Kind::kAccepted}};
  t.table = {.caption = "Named <ops>", .head = {"client", "value"}, .rows = {{"0", "<b>"}}};
  const std::string html = RenderHtml(t);
  EXPECT_NE(html.find("<caption>Named &lt;ops&gt;</caption>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><th>client</th><th>value</th></tr>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><td>0</td><td>&lt;b&gt;</td></tr>"), std::string::npos) << html;
  EXPECT_LT(html.find("<table"), html.find("<svg"));
  t.table.rows.clear();
  EXPECT_EQ(RenderHtml(t).find("<table"), std::string::npos);
}

TEST(TimelineHtmlTest, ATitleReplacesTheDemosHeading) {
  Timeline t = WorkerTimeline();
  t.title = "pause test <run 7>";
  std::string html = RenderHtml(t);
  EXPECT_NE(html.find("<title>pause test &lt;run 7&gt;</title>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h1>pause test &lt;run 7&gt;</h1>"), std::string::npos);
  EXPECT_EQ(html.find("fencekit demo"), std::string::npos);

  Timeline demo;
  demo.scenario = "gc-pause";
  html = RenderHtml(demo);
  EXPECT_NE(html.find("<title>fencekit demo: gc-pause</title>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h1>fencekit demo: gc-pause (fencing on)</h1>"), std::string::npos);
}

TEST(TimelineHtmlTest, TheDefaultLanesAreTheDemos) {
  Timeline t;
  std::vector<Lane> lanes = LanesOf(t);
  ASSERT_EQ(lanes.size(), 4u);
  EXPECT_EQ(lanes[0].id, "A");
  EXPECT_EQ(lanes[0].title, "Client A");
  EXPECT_TRUE(lanes[0].client);
  EXPECT_TRUE(lanes[1].client);
  EXPECT_EQ(lanes[2].title, "Lock service");
  EXPECT_FALSE(lanes[2].client);
  EXPECT_EQ(lanes[3].title, "Storage (fenced)");
  EXPECT_FALSE(lanes[3].client);
  EXPECT_EQ(RenderJson(t).find("lanes"), std::string::npos) << "the demo's JSON is unchanged";
}

// A pause-test run: ~1000 events over seconds on eight workers.
TEST(TimelineHtmlTest, AThousandEventsRenderQuickly) {
  Timeline t;
  t.title = "pause test";
  for (int w = 0; w < 8; ++w) t.lanes.push_back({"worker " + std::to_string(w), "", true});
  t.lanes.push_back({"lock service", "Lock service", false});
  for (int i = 0; i < 1000; ++i) {
    std::string worker = "worker " + std::to_string(i % 8);
    Kind kind = i % 5 == 0 ? Kind::kGrant : i % 7 == 0 ? Kind::kUnknown : Kind::kAccepted;
    // Three events at each moment, and a wait of 200 ms after every hundred.
    t.events.push_back({i / 3 * 4 + i / 100 * 200, worker, "writes key-" + std::to_string(i % 13),
                        i, "", kind, "", i % 50 == 0});
    if (i % 10 == 9) {
      t.events.push_back({t.events.back().time_ms, "lock service",
                          "lease of " + worker + " expires", i, "", Kind::kExpire, worker});
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::string html = RenderHtml(t);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_EQ(Occurrences(html, "<g class=\"event"), 1100u);
  EXPECT_EQ(Occurrences(html, "class=\"flag-ring\""), 20u);
  EXPECT_FALSE(RenderTerminal(t, false).empty());
}

}  // namespace
}  // namespace fencekit::timeline
