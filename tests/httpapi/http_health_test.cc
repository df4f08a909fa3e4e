// What an operator sees of fenced, continued: /healthz and /readyz, the metrics and
// fenced_build_info, a clean stop, the /ui page's files. On the real server over loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "fencekit/common/text.h"
#include "observe/log_sink.h"
#include "observe/metrics.h"
#include "support/faults/fault_vfs.h"
#include "support/matching.h"
#include "support/server_fixture.h"
#include "support/test_support.h"
#include "wire.h"

#include "httpapi/ops_fixture.h"
namespace fencekit::httpapi {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::WaitFor;

// --- Health -------------------------------------------------------------------------------

TEST_F(OpsTest, HealthzAndReadyzAreOkOnAWorkingStoreAndOpenUnderAuth) {
  StartServer({.auth_file = AuthFile(dir_)});
  for (const char* path : {"/healthz", "/readyz"}) {
    auto r = Call("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.body, "{\"status\":\"ok\"}\n");
    EXPECT_EQ(Call("POST", path).status, 405);
  }
}

TEST_F(OpsTest, HealthzIs503WhenTheDatabaseCannotBeRead) {
  ASSERT_TRUE(store_->Close().ok());
  auto live = Call("GET", "/healthz");
  EXPECT_EQ(live.status, 503);
  EXPECT_EQ(live.header("retry-after"), "1");
  auto body = boost::json::parse(live.body).as_object();
  EXPECT_EQ(body.at("error").as_string(), "storage_error");
  EXPECT_NE(std::string(body.at("message").as_string()).find("the database did not answer a read"),
            std::string::npos)
      << live.body;
  auto ready = Call("GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.find("\"not_ready\""), std::string::npos) << ready.body;
}

TEST_F(OpsTest, HealthzAnswersWithinItsTimeoutWhenTheDatabaseHangs) {
  testing::FaultVfs::Register();
  StartServer({.health_timeout = 200ms}, {.sqlite_vfs = testing::FaultVfs::kName});
  ASSERT_EQ(Call("GET", "/healthz").status, 200);
  testing::FaultVfs::stall = true;  // every transaction now waits
  auto started = std::chrono::steady_clock::now();
  auto r = Call("GET", "/healthz");
  auto took = std::chrono::steady_clock::now() - started;
  auto ready = Call("GET", "/readyz");
  testing::FaultVfs::stall = false;
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("did not answer a read within 200 ms"), std::string::npos) << r.body;
  EXPECT_LT(took, 2s);
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("did not answer a read"), std::string::npos) << ready.body;
  EXPECT_TRUE(WaitFor([&] { return Call("GET", "/healthz").status == 200; }, 10s))
      << "healthy again once the database answers";
}

// A balancer that takes a not-ready fenced out of rotation sends it no write: /readyz must find
// out by itself when the store can commit again.
TEST_F(OpsTest, ReadyzIs503WhileCommitsFailAndReadyAgainWithoutAWrite) {
  testing::FaultVfs::Register();
  StartServer({}, {.sqlite_vfs = testing::FaultVfs::kName});
  ASSERT_EQ(PutWithToken("k", "1").status, 201);
  testing::FaultVfs::fail_sync = true;
  auto failed = PutWithToken("k", "2");
  ASSERT_EQ(failed.status, 503) << failed.body;
  auto ready = Call("GET", "/readyz");
  testing::FaultVfs::fail_sync = false;
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.header("retry-after"), "1");
  auto body = boost::json::parse(ready.body).as_object();
  EXPECT_EQ(body.at("error").as_string(), "not_ready");
  std::string message(body.at("message").as_string());
  EXPECT_NE(message.find("the last write could not be committed"), std::string::npos) << message;
  EXPECT_NE(message.find("a probe commit just now failed too"), std::string::npos) << message;
  EXPECT_EQ(Call("GET", "/healthz").status, 200) << "reads still work: alive, not ready";
  // The disk works again: ready at the next probe, with no write in between.
  auto again = Call("GET", "/readyz");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_GE(store_->Stats().recoveries, 1u);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);
  EXPECT_EQ(PutWithToken("k", "2").status, 200);
}

// Probes that arrive together share one probe of the database: a flood of them, pipelined on
// many connections, does not make a genuine probe fail while the database is healthy.
TEST_F(OpsTest, AFloodOfProbesDoesNotFailAGenuineOne) {
  std::atomic<bool> stop{false};
  std::atomic<int> flood_answers{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < 16; ++i) {
    flood.emplace_back([&] {
      RawConnection c(server_->port());
      std::string burst;
      for (int k = 0; k < 32; ++k) burst += Request("GET", k % 2 ? "/readyz" : "/healthz");
      while (!stop.load()) {
        c.Send(burst);
        for (int k = 0; k < 32; ++k) {
          if (c.Read().status == 0) return;
          ++flood_answers;
        }
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return flood_answers.load() > 1000; }, 30s));
  int failed = 0;
  std::string example;
  for (int i = 0; i < 40; ++i) {
    auto r = Call("GET", i % 2 ? "/healthz" : "/readyz");
    if (r.status != 200) {
      ++failed;
      example = r.body;
    }
  }
  stop = true;
  for (auto& t : flood) t.join();
  EXPECT_EQ(failed, 0) << "e.g. " << example;
}

TEST(MetricsTest, EveryRefusalLabelIsAnErrorNameFencedAnswers) {
  Metrics metrics;
  metrics.CountRefused(wire::Error::kBadLock);
  std::string text = metrics.Render(StoreStats{});
  const std::string series = "fenced_writes_refused_total{reason=\"";
  std::size_t labels = 0;
  for (auto at = text.find(series); at != std::string::npos; at = text.find(series, at + 1)) {
    auto start = at + series.size();
    std::string label = text.substr(start, text.find('"', start) - start);
    const wire::ErrorInfo* row = wire::FindError(label);
    ASSERT_NE(row, nullptr) << label << " is not an error name";
    EXPECT_TRUE(row->write_refusal) << label;
    ++labels;
  }
  std::size_t counted = 0;
  for (const auto& row : wire::Errors()) counted += row.write_refusal ? 1 : 0;
  EXPECT_EQ(labels, counted);
  EXPECT_NE(text.find(series + "bad_lock\"} 1\n"), std::string::npos) << text;
}

// A refusal is counted under the error it is answered with: a bad lock name as bad_lock, a bad
// batch body as bad_body.
TEST_F(OpsTest, RefusalsAreCountedUnderTheErrorTheyAreAnsweredWith) {
  EXPECT_EQ(
      Call("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}, {"Fencing-Lock", ""}}, "v").status,
      400);
  EXPECT_EQ(Call("POST", "/v1/batch", {}, "not json").status, 400);
  auto m = Call("GET", "/metrics").body;
  EXPECT_NE(m.find("fenced_writes_refused_total{reason=\"bad_lock\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("fenced_writes_refused_total{reason=\"bad_key\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("fenced_writes_refused_total{reason=\"bad_body\"} 1\n"), std::string::npos) << m;
}

TEST_F(OpsTest, MetricsCarryTheBuildInfo) {
  auto r = Call("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("# TYPE fenced_build_info gauge\nfenced_build_info{version=\"" +
                        std::string(FENCEKIT_VERSION) + "\"} 1\n"),
            std::string::npos);
}

// --- Shutdown ----------------------------------------------------------------------------

// The write watchdog's timer used to be re-armed by a tick already due when Stop() cancelled
// it, and then kept the I/O threads (and Wait()) running for ever.
TEST_F(OpsTest, StopReturnsWhenTheWriteWatchdogTicksAtTheSameTime) {
  for (int i = 0; i < 150; ++i) {
    StartServer({.threads = 1, .write_timeout = 40ms});              // a watchdog tick every 10 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(i % 11));  // stop at varied phases
    auto stopped = std::make_shared<std::promise<void>>();
    auto done = stopped->get_future();
    std::thread([server = server_.get(), stopped] {
      server->Stop();
      server->Wait();
      stopped->set_value();
    }).detach();
    if (done.wait_for(5s) != std::future_status::ready) {
      (void)server_.release();  // still running: leaked rather than waited for
      FAIL() << "Stop() and Wait() did not return within 5 s (round " << i << ")";
    }
  }
}

// --- The page's files ---------------------------------------------------------------------

TEST_F(OpsTest, ThePageAndItsFilesAreServedUnderAStrictPolicy) {
  StartServer({.auth_file = AuthFile(dir_)});  // static: open without a token
  struct File {
    const char* path;
    const char* type;
  } files[] = {{"/ui", "text/html; charset=utf-8"},
               {"/ui/app.js", "text/javascript; charset=utf-8"},
               {"/ui/app.css", "text/css; charset=utf-8"}};
  std::string all;
  for (const auto& f : files) {
    auto r = Call("GET", f.path);
    ASSERT_EQ(r.status, 200) << f.path;
    EXPECT_EQ(r.header("content-type"), f.type);
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
    std::string csp = r.header("content-security-policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
    all += r.body;
  }
  EXPECT_NE(all.find("src=\"/ui/app.js\""), std::string::npos);
  // Nothing from the network, and feed text never parsed as markup.
  EXPECT_EQ(all.find("https://"), std::string::npos);
  EXPECT_EQ(all.find("http://"), all.find("http://www.w3.org/2000/svg"));
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                           "eval(", "new Function"}) {
    EXPECT_EQ(all.find(sink), std::string::npos) << sink;
  }
  RawConnection head(server_->port());
  head.Send(Request("HEAD", "/ui"));
  EXPECT_EQ(head.ReadHeadAnswer().status, 200);
  EXPECT_EQ(Call("POST", "/ui").status, 405);
  EXPECT_EQ(Call("GET", "/ui/missing.js", {kUser}).status, 404);
  EXPECT_EQ(Call("GET", "/ui/missing.js").status, 401) << "only the page's own files are open";
}

}  // namespace
}  // namespace fencekit::httpapi
