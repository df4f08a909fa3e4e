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

#include "httpapi/ops_fixture.h"
namespace fencekit::httpapi {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;
using testing::WaitFor;

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

}  // namespace
}  // namespace fencekit::httpapi
