// Headless Chromium (Debian's chromium) driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe): open a page, evaluate JavaScript in it while it runs, take a
// screenshot. For the tests of the pages fenced serves and the demo writes.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_support.h"

namespace fencekit::testing {

// The flags every headless run of the tests uses (no network of its own, no first-run work),
// with a fresh profile in `profile_dir`.
std::vector<std::string> ChromiumFlags(const std::string& profile_dir, int width, int height);

// One browser. Failures are reported with ADD_FAILURE. Thread safety: not safe for concurrent
// use.
class Chromium {
 public:
  // Starts it with a fresh profile under `dir` and a window of width x height.
  explicit Chromium(const std::string& dir, int width = 1400, int height = 800);
  // Kills the browser and its helpers.
  ~Chromium();
  Chromium(const Chromium&) = delete;
  Chromium& operator=(const Chromium&) = delete;

  // Opens `url` in a new tab and attaches to it; false on failure.
  bool Open(const std::string& url);
  // Reloads the page and waits until the new one is loaded; false on failure.
  bool Reload();
  // `expression` evaluated in the page (promises awaited), its value as JSON; nullopt when it
  // threw or no answer came within `timeout`.
  std::optional<boost::json::value> Evaluate(
      const std::string& expression, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The textContent of the elements matching CSS `selector`, in document order.
  std::vector<std::string> Texts(const std::string& selector);
  // The pairs of texts among the elements matching `selector` (SVG text) whose boxes overlap as
  // the browser lays them out, "a / b; c / d"; "" when none does.
  std::string OverlappingTexts(const std::string& selector);
  // Polls `expression` until it is true; false when `timeout` passed first.
  bool WaitUntil(const std::string& expression, std::chrono::milliseconds timeout);
  // A PNG of the page as shown; empty on failure.
  std::string Screenshot();
  // What the browser printed (its log file), to quote when something fails.
  std::string Log() const;

 private:
  // One DevTools command; its "result", or nullopt on an error or a timeout.
  std::optional<boost::json::object> Call(std::string_view method, boost::json::object params,
                                          std::chrono::milliseconds timeout, bool in_page = true);

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  std::string buffer_;
  std::string log_path_;
  std::string session_;
  std::int64_t next_id_ = 1;
};

// A suite whose tests share one browser of kWidth x kHeight (starting it is most of a test's
// time): browser() in each test.
template <int kWidth = 1400, int kHeight = 800>
class BrowserSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    browser_ = new Chromium(dir_->path(), kWidth, kHeight);
  }
  static void TearDownTestSuite() {
    delete browser_;
    delete dir_;
  }
  static Chromium& browser() { return *browser_; }

 private:
  static inline TempDir* dir_ = nullptr;
  static inline Chromium* browser_ = nullptr;
};

// Writes `png` to $FENCEKIT_SCREENSHOTS/`name` when that variable names a folder (the
// screenshots docs/ shows are made so: FENCEKIT_SCREENSHOTS=$PWD/docs/images ctest -R Demo);
// else does nothing. ADD_FAILURE when the file cannot be written.
void SaveScreenshot(const std::string& png, const std::string& name);

// The distinct byte values of a PNG's inflated image data: a blank page has a handful (filter
// bytes and one colour), a drawn diagram many.
int DistinctImageBytes(const std::string& png);

}  // namespace fencekit::testing
