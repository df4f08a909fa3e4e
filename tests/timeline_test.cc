// The demo's HTML timeline: its time axis is proportional with breaks across long waits, and its
// labels are stacked so that none overlaps another (demos/timeline.h).
#include "timeline.h"

#include <gtest/gtest.h>

namespace fencekit::demo {
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
  EXPECT_EQ(html.find("rotate(-"), std::string::npos);
  EXPECT_NE(html.find(">Storage (fenced)</text>"), std::string::npos);
  // Three events of A at 14 ms: one place (the first event's x, 190), one time under the lane.
  EXPECT_EQ(Occurrences(html, ">14 ms</text>"), 1u) << html;
  EXPECT_EQ(Occurrences(html, "<circle cx=\"190\""), 3u) << html;
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

}  // namespace
}  // namespace fencekit::demo
