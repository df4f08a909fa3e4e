// What an operator sees of fenced: a log line per write not accepted and, with --access-log, per
// request; /healthz and /readyz; fenced_build_info; the /ui page's files. On the real server
// over loopback (and the real fenced binary for its flags).
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

namespace fencekit::httpapi {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::WaitFor;

// The lines a server logged, as its ServerOptions::log sink received them.
class Lines {
 public:
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  // The lines containing `part`, once at least `n` of them are there (or the bound passed).
  std::vector<std::string> With(const std::string& part, std::size_t n = 1) {
    std::vector<std::string> out;
    WaitFor(
        [&] {
          std::lock_guard lock(mu_);
          out.clear();
          for (const auto& l : lines_) {
            if (l.find(part) != std::string::npos) out.push_back(l);
          }
          return out.size() >= n;
        },
        5s);
    return out;
  }
  // The lines containing `part` now, without waiting.
  std::vector<std::string> NowWith(const std::string& part) {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      if (l.find(part) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// "t" may read and write k/; "admin-t" is admin (digests: printf %s TOKEN | sha256sum).
std::string AuthFile(const testing::TempDir& dir) {
  std::string path = dir.File("auth.json");
  std::ofstream(path) << R"({"principals": [
      {"name": "user", "read": ["k/"], "write": ["k/"], "token_sha256":
       "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"},
      {"name": "admin", "admin": true, "token_sha256":
       "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c"}]})";
  return path;
}

const std::pair<std::string, std::string> kUser = {"Authorization", "Bearer t"};

class OpsTest : public testing::ServerFixture {
 protected:
  Lines lines_;
};

// --- Logs ---------------------------------------------------------------------------------

TEST_F(OpsTest, EachRefusalIsOneLineNamingLockTokenHighestAndPrincipal) {
  StartServer({.auth_file = AuthFile(dir_), .log = lines_.Sink()});
  auto put = [&](std::string token) {
    return Call("PUT", "/v1/objects/k/1",
                {{"Fencing-Token", token}, {"Fencing-Lock", "k/lock"}, kUser}, "v");
  };
  ASSERT_EQ(put("5").status, 201);
  ASSERT_EQ(put("3").status, 409);
  auto refused = lines_.With(" fenced: refused ");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_TRUE(testing::FullMatch(refused[0],
                                 R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z fenced: refused put )"
                                 R"(lock="k/lock" token=3 highest=5 reason=stale_token key="k/1" )"
                                 R"(principal="user")"))
      << refused[0];
  EXPECT_TRUE(lines_.NowWith(" fenced: access ").empty()) << "no access log without the option";
}

TEST_F(OpsTest, ARefusedBatchIsOneLineAndAFailedPreconditionIsARefusal) {
  StartServer({.log = lines_.Sink()});
  auto batch = [&](int token) {
    return Call("POST", "/v1/batch", {},
                R"({"lock":"l","token":)" + std::to_string(token) +
                    R"(,"writes":[{"op":"put","key":"a","value":"1"},{"op":"delete","key":"b"}]})");
  };
  ASSERT_EQ(batch(5).status, 200);
  ASSERT_EQ(batch(3).status, 409);
  auto refused = lines_.With(" fenced: refused ");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find(R"(fenced: refused batch lock="l" token=3 highest=5 )"
                            R"(reason=stale_token key="a" writes=2)"),
            std::string::npos)
      << refused[0];

  auto r = Call("PUT", "/v1/objects/a",
                {{"Fencing-Token", "5"}, {"Fencing-Lock", "l"}, {"If-Match", "\"99\""}}, "v");
  ASSERT_EQ(r.status, 412) << r.body;
  refused = lines_.With(" fenced: refused put ");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find(" reason=precondition_failed key=\"a\""), std::string::npos)
      << refused[0];
  EXPECT_TRUE(lines_.NowWith(" fenced: failed ").empty());
}

TEST_F(OpsTest, ARefusalLineEncodesWhatItQuotes) {
  StartServer({.log = lines_.Sink()});
  const std::string key = "k\" reason=accepted \xFF";
  const std::string lock = "l\" principal=\"root";
  auto put = [&](std::string token) {
    return Call("PUT", wire::ObjectPath(key), {{"Fencing-Token", token}, {"Fencing-Lock", lock}},
                "v");
  };
  ASSERT_EQ(put("5").status, 201);
  ASSERT_EQ(put("4").status, 409);
  auto refused = lines_.With(" fenced: refused ");
  ASSERT_EQ(refused.size(), 1u);
  const std::string& line = refused[0];
  EXPECT_EQ(line.find('\xFF'), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find(" key=\"" + PercentEncode(key) + "\""), std::string::npos) << line;
  EXPECT_NE(line.find(R"( lock="l\" principal=\"root")"), std::string::npos) << line;
  EXPECT_EQ(line.find(" principal="), line.find(R"( principal=\"root)")) << "no forged field";
}

TEST_F(OpsTest, AWriteTheStoreCouldNotCommitIsLoggedAsFailed) {
  testing::FaultVfs::Register();
  StartServer({.log = lines_.Sink()}, {.sqlite_vfs = testing::FaultVfs::kName});
  testing::FaultVfs::fail_sync = true;
  auto r = PutWithToken("k", "1");
  testing::FaultVfs::fail_sync = false;
  ASSERT_EQ(r.status, 503) << r.body;
  auto failed = lines_.With(" fenced: failed ");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].find("put lock=\"k\" token=1 error=storage_error key=\"k\" message=\""),
            std::string::npos)
      << failed[0];
}

TEST_F(OpsTest, AccessLogIsOneLinePerRequest) {
  StartServer({.auth_file = AuthFile(dir_), .access_log = true, .log = lines_.Sink()});
  ASSERT_EQ(Call("PUT", "/v1/objects/k/1", {{"Fencing-Token", "2"}, kUser}, "hello").status, 201);
  ASSERT_EQ(Call("GET", "/v1/objects/k/1", {kUser}).status, 200);
  ASSERT_EQ(Call("GET", "/v1/objects/k/%22%0A").status, 401);
  ASSERT_EQ(Call("GET", "/healthz").status, 200);
  RawConnection garbage(server_->port());
  garbage.Send("GET /\xFF\x01 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(garbage.Read().status, 400);
  auto access = lines_.With(" fenced: access ", 5);
  ASSERT_EQ(access.size(), 5u);
  const std::string line =
      R"re(\S+ fenced: access peer=127\.0\.0\.1:\d+ method=(-|"(\w+)") target=(-|"([^"]*)") )re"
      R"re(status=(\d+) bytes=(\d+) duration_us=\d+( principal="(\w+)")?)re";
  // Lines of requests on different connections may come in any order: keyed by what they show.
  std::map<std::string, std::vector<std::string>> by_request;
  for (const auto& l : access) {
    const std::vector<std::string> m = testing::FullMatchGroups(l, line);
    ASSERT_FALSE(m.empty()) << l;
    EXPECT_EQ(l.find('\xFF'), std::string::npos) << l;
    by_request[m[1] + " " + m[3]] = m;
  }
  ASSERT_EQ(by_request.size(), 5u);
  // (at(): a request missing from the log finds no groups.)
  const auto& put = by_request["\"PUT\" \"/v1/objects/k/1\""];
  EXPECT_EQ(put.at(5), "201");
  EXPECT_EQ(put.at(8), "user");
  const auto& get = by_request["\"GET\" \"/v1/objects/k/1\""];
  EXPECT_EQ(get.at(5), "200");
  EXPECT_EQ(get.at(6), "5") << "the body's bytes";
  const auto& anonymous = by_request["\"GET\" \"/v1/objects/k/%22%0A\""];
  EXPECT_EQ(anonymous.at(5), "401") << "the target as sent, still encoded";
  EXPECT_EQ(anonymous.at(7), "") << "nobody was authenticated";
  EXPECT_EQ(by_request["\"GET\" \"/healthz\""].at(5), "200");
  const auto& garbled = by_request["- -"];
  EXPECT_EQ(garbled.at(5), "400") << "an unparseable request has no method or target to show";
}

TEST_F(OpsTest, ARequestRefusedBeforeItsBodyIsLoggedToo) {
  StartServer({.max_body_bytes = 4, .access_log = true, .log = lines_.Sink()});
  ASSERT_EQ(PutWithToken("k", "1", "too long").status, 413);
  auto access = lines_.With(" fenced: access ");
  ASSERT_EQ(access.size(), 1u);
  EXPECT_NE(access[0].find("method=\"PUT\" target=\"/v1/objects/k\" status=413"), std::string::npos)
      << access[0];
}

TEST(LogSinkTest, ASinkThatBlocksDropsLinesAndSaysSoOnceItKeepsUp) {
  std::mutex mu;
  std::condition_variable cv;
  bool blocked = true;
  std::vector<std::string> written;
  Metrics metrics;
  {
    LogSink sink(
        [&](std::string_view line) {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return !blocked; });
          written.emplace_back(line);
        },
        &metrics);
    auto started = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < LogSink::kMaxQueued + 100; ++i) sink.Log("line");
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "Log must never wait";
    {
      std::lock_guard lock(mu);
      blocked = false;
    }
    cv.notify_all();
    // Once the queue has drained, the next line gets through, after a note of the drops.
    ASSERT_TRUE(WaitFor([&] {
      std::lock_guard lock(mu);
      return written.size() >= LogSink::kMaxQueued;
    }));
    sink.Log("after");
  }
  EXPECT_NE(metrics.Render({}).find("fenced_log_lines_dropped_total "), std::string::npos);
  ASSERT_GE(written.size(), 2u);
  EXPECT_EQ(written.back(), "after");
  std::string note = written[written.size() - 2];
  EXPECT_NE(note.find("log line(s) dropped: the log could not keep up"), std::string::npos) << note;
}

TEST(FencedFlagsTest, AccessLogAndRefusalsGoToStandardError) {
  testing::TempDir dir;
  testing::FencedProcess fenced(dir.File("store.db"), {"--access-log"});
  RawConnection c(fenced.port());
  c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "2"}}, "v"));
  ASSERT_EQ(c.Read().status, 201);
  c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "1"}}, "v"));
  ASSERT_EQ(c.Read().status, 409);
  EXPECT_TRUE(WaitFor(
      [&] {
        std::string out = fenced.Output();
        return out.find("fenced: refused put lock=\"k\" token=1 highest=2") != std::string::npos &&
               out.find("fenced: access peer=127.0.0.1:") != std::string::npos &&
               out.find("status=409") != std::string::npos;
      },
      5s))
      << fenced.Output();
  EXPECT_NE(fenced.Output().find("/ui"), std::string::npos) << "the start line names the page";
}

// --batch-linger takes microseconds; a malformed or too long one is a usage error naming it.
TEST(FencedFlagsTest, BatchLingerTakesMicrosecondsAndRefusesAMalformedOrTooLongOne) {
  testing::TempDir dir;
  for (auto [value, says] : std::vector<std::pair<std::string, std::string>>{
           {"5x", "--batch-linger: duration \"5x\" is invalid"},
           {"1s", "--batch-linger 1s is too long"}}) {
    auto r = testing::RunCommand({testing::FencedBinary(), "--db", dir.File("store.db"), "--listen",
                                  "127.0.0.1:0", "--batch-linger", value});
    EXPECT_EQ(r.exit_code, 2) << value << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  testing::FencedProcess lingering(dir.File("store.db"), {"--batch-linger", "300us"});
  RawConnection c(lingering.port());
  c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "2"}}, "v"));
  EXPECT_EQ(c.Read().status, 201);
}

// fenced that refuses to start leaves no database file of its own making behind (it was made
// before the listen address was tried), and never removes one that was there before.
TEST(FencedFlagsTest, ARefusedStartLeavesNoNewDatabaseFileBehind) {
  testing::TempDir dir;
  testing::FencedProcess taken(dir.File("taken.db"));  // its port is in use
  const std::string db = dir.File("store.db");
  const std::vector<std::vector<std::string>> refusals = {
      {"--listen", "127.0.0.1:" + std::to_string(taken.port())},
      {"--listen", "192.0.2.1:0"},  // an address of no interface here (TEST-NET-1)
      {"--listen", "127.0.0.1:0", "--tls-cert", dir.File("none.pem"), "--tls-key",
       dir.File("none.key")},
  };
  auto start = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {testing::FencedBinary(), "--db", db});
    return testing::RunCommand(args);
  };
  for (const auto& args : refusals) {
    auto r = start(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args) << r.out << r.err;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      EXPECT_FALSE(std::filesystem::exists(db + suffix))
          << ::testing::PrintToString(args) << " left " << db + suffix << " behind: " << r.err;
    }
  }
  // A database that was there before stays, with what it holds.
  {
    testing::FencedProcess first(db);
    RawConnection c(first.port());
    c.Send(Request("PUT", "/v1/objects/k", {{"Fencing-Token", "2"}}, "kept"));
    ASSERT_EQ(c.Read().status, 201);
  }
  EXPECT_EQ(start(refusals.front()).exit_code, 2);
  testing::FencedProcess again(db);
  RawConnection c(again.port());
  c.Send(Request("GET", "/v1/objects/k"));
  auto kept = c.Read();
  EXPECT_EQ(kept.status, 200);
  EXPECT_EQ(kept.body, "kept");
}

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
