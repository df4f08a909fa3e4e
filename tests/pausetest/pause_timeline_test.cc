// The timeline a failing `fencectl pause-test --worker` run leaves (timeline.html), as a person
// sees it in headless Chromium in a 1400 x 800 window: every recorded operation a bar from its
// start to its end, the page no wider than the window, the drawing opened scrolled to the first
// operation the check named, and those operations listed beside it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/chromium.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::Chromium;
using testing::RunCommand;
using testing::TempDir;

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// Each invocation writes five values to "c", each read back; the last read of the third reads
// a value nobody wrote, after 29 operations, a few thousand pixels: what the check names is far
// to the right. (Five to an invocation: on a loaded machine a 3 s run held 9 invocations.)
constexpr const char* kLateViolation = R"sh(
f="$FENCEKIT_RUN_DIR/n"; n=$(( $(cat "$f" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$f"
now() { date +%s%6N; }
rec() { printf '{"op":"%s","key":"c","value":"%s","start_us":%s,"end_us":%s,"outcome":"ok"}\n' \
  "$1" "$2" "$3" "$(now)" >> "$FENCEKIT_HISTORY"; }
for i in 1 2 3 4 5; do
  s=$(now); sleep 0.005; rec write "$n.$i" "$s"
  v=$n.$i; [ "$n" -eq 3 ] && [ "$i" -eq 5 ] && v=nobody-wrote-this
  s=$(now); rec read "$v" "$s"
done
)sh";

TEST(PauseTimelineTest, AFailingRunsPageOpensAtWhatTheCheckNamedWithEveryOperationABar) {
  TempDir dir;
  const std::string work = dir.File("work");
  auto r =
      RunCommand({testing::FencectlBinary(), "pause-test", "--worker", kLateViolation, "--runs",
                  "1", "--pauses", "0", "--run-length", "3s", "--work-dir", work, "-q"});
  ASSERT_EQ(r.exit_code, 4) << r.err;
  const std::string html = work + "/run-0/timeline.html";
  const int ops = Lines(work + "/run-0/history.jsonl");
  ASSERT_GE(ops, 24) << "too few operations for a page wider than the window";

  Chromium browser(dir.path(), 1400, 800);
  ASSERT_TRUE(browser.Open("file://" + html)) << browser.Log();
  ASSERT_TRUE(browser.WaitUntil("document.readyState === 'complete'", std::chrono::seconds(10)));
  // Every operation is a bar.
  EXPECT_EQ(browser.Evaluate("document.querySelectorAll('rect.op').length"),
            boost::json::value(ops));
  // The drawing is wider than the window (else the test shows nothing), the page is not.
  EXPECT_EQ(browser.Evaluate("document.querySelector('#drawing svg').getBoundingClientRect()"
                             ".width > window.innerWidth"),
            boost::json::value(true));
  EXPECT_EQ(browser.Evaluate("document.documentElement.scrollWidth <= window.innerWidth"),
            boost::json::value(true));
  // What the check named lies beyond the window's width in the drawing, and the page opens
  // scrolled to it: inside the window.
  EXPECT_EQ(browser.Evaluate("document.getElementById('first-flagged').getBoundingClientRect()"
                             ".left + document.getElementById('drawing').scrollLeft > "
                             "window.innerWidth"),
            boost::json::value(true));
  EXPECT_EQ(browser.Evaluate("(() => { const b = document.getElementById('first-flagged')"
                             ".getBoundingClientRect(); return b.left >= 0 && b.right <= "
                             "window.innerWidth; })()"),
            boost::json::value(true));
  // Each named operation is listed with its client, key, values and times.
  const auto cells = browser.Texts("table.named td");
  std::string row;
  for (const auto& c : cells) row += c + "|";
  EXPECT_NE(row.find("|read|c||nobody-wrote-this|ok|"), std::string::npos) << row;
  EXPECT_NE(row.find("history.jsonl "), std::string::npos) << row;
  const auto heads = browser.Texts("table.named th");
  EXPECT_EQ(heads.size(), 9u);
}

}  // namespace
}  // namespace fencekit
