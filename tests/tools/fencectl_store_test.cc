// fencectl against a real fenced: get and put with their exit codes, conditional writes,
// batches and listing.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/child_process.h"
#include "support/servers/lock_services.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"
#include "tools/fencectl_json.h"

namespace fencekit {
namespace {

using testing::CommandResult;
using testing::FencectlBinary;
using testing::FencedProcess;
using testing::RedisServer;
using testing::RunCommand;
using testing::Json;
using testing::TempDir;

TEST(FencectlStoreTest, PutAndGetWithExitCodes) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  std::vector<std::string> env = {"FENCEKIT_STORE=" + fenced.url()};
  auto ctl = [&](std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), FencectlBinary());
    return RunCommand(args, env, input);
  };
  auto put = ctl({"put", "--lock", "L", "--token", "5", "report", "hello"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(Json(put.out)["version"].as_int64(), 1);
  auto from_stdin = ctl({"put", "--lock", "L", "--token", "5", "report", "-"}, "from stdin");
  EXPECT_EQ(from_stdin.exit_code, 0);
  auto stale = ctl({"put", "--lock", "L", "--token", "4", "report", "old"});
  EXPECT_EQ(stale.exit_code, 3);
  EXPECT_EQ(Json(stale.out)["highest"].as_int64(), 5);
  EXPECT_NE(stale.err.find("stale"), std::string::npos);
  EXPECT_EQ(ctl({"put", "--lock", "L", "--token", "abc", "report", "x"}).exit_code, 64);
  auto raw = ctl({"get", "--raw", "report"});
  EXPECT_EQ(raw.exit_code, 0);
  EXPECT_EQ(raw.out, "from stdin");
  auto got = ctl({"get", "report"});
  ASSERT_EQ(got.exit_code, 0);
  auto obj = Json(got.out);
  EXPECT_EQ(obj["value"].as_string(), "from stdin");
  EXPECT_EQ(obj["token"].as_int64(), 5);
  EXPECT_EQ(ctl({"get", "absent"}).exit_code, 1);
  auto down = RunCommand({FencectlBinary(), "get", "--store", "http://127.0.0.1:1", "k"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.err.find("cannot connect"), std::string::npos) << down.err;
}

TEST(FencectlStoreTest, ConditionalPutsBatchesAndListing) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  std::vector<std::string> env = {"FENCEKIT_STORE=" + fenced.url()};
  auto ctl = [&](std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), FencectlBinary());
    return RunCommand(args, env, input);
  };
  auto created = ctl({"put", "--lock", "L", "--token", "5", "--if-absent", "cfg", "one"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::int64_t version = Json(created.out)["version"].as_int64();
  auto again = ctl({"put", "--lock", "L", "--token", "5", "--if-absent", "cfg", "two"});
  EXPECT_EQ(again.exit_code, 6) << again.err;
  EXPECT_EQ(Json(again.out)["version"].as_int64(), version);
  EXPECT_NE(again.err.find("absent"), std::string::npos) << again.err;
  const std::string v = std::to_string(version);
  auto matched = ctl({"put", "--lock", "L", "--token", "5", "--if-version", v, "cfg", "three"});
  ASSERT_EQ(matched.exit_code, 0) << matched.err;
  auto stale_version = ctl({"delete", "--lock", "L", "--token", "5", "--if-version", v, "cfg"});
  EXPECT_EQ(stale_version.exit_code, 6);
  EXPECT_EQ(ctl({"get", "--raw", "cfg"}).out, "three");
  EXPECT_EQ(ctl({"put", "--lock", "L", "--token", "5", "--if-version", "0", "cfg", "x"}).exit_code,
            64);
  auto both = ctl({"put", "--lock", "L", "--token", "5", "--if-version", "2", "--if-absent",
                   "cfg", "x"});
  EXPECT_EQ(both.exit_code, 64);

  std::string file = dir.File("writes.json");
  std::ofstream(file) << R"([{"op": "put", "key": "a", "value": "1"},
                            {"op": "put", "key": "b", "value_base64": "AP8="},
                            {"op": "delete", "key": "cfg"}])";
  auto batch = ctl({"batch", "--lock", "L", "--token", "6", file});
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  EXPECT_EQ(Json(batch.out)["writes"].as_array().size(), 3u);
  EXPECT_EQ(ctl({"get", "--raw", "b"}).out, std::string("\0\xff", 2));
  auto stale = ctl({"batch", "--lock", "L", "--token", "5", "-"},
                   R"([{"op": "put", "key": "a", "value": "old"},
                       {"op": "put", "key": "z", "value": "old"}])");
  EXPECT_EQ(stale.exit_code, 3) << stale.err;
  EXPECT_EQ(ctl({"get", "--raw", "a"}).out, "1");
  EXPECT_EQ(ctl({"get", "z"}).exit_code, 1);
  EXPECT_EQ(ctl({"batch", "--lock", "L", "--token", "6", "-"}, "not json").exit_code, 64);
  EXPECT_EQ(ctl({"batch", "--lock", "L", "--token", "6", dir.File("none.json")}).exit_code, 1);

  auto page = ctl({"list", "--limit", "1"});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  auto first = Json(page.out);
  EXPECT_EQ(first["objects"].as_array().size(), 1u);
  EXPECT_EQ(first["next"].as_string(), "a");
  auto all = ctl({"list", "--limit", "1", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 2);  // "a", then "b"
  EXPECT_NE(all.out.find("\"key\":\"b\""), std::string::npos) << all.out;
  EXPECT_EQ(ctl({"list", "--limit", "0"}).exit_code, 64);
  EXPECT_EQ(ctl({"list", "--limit", "1001"}).exit_code, 64);
}

// fencectl batch FILE takes the body of POST /v1/batch as docs/http-api.md shows it, or its
// list of writes alone; anything else is a usage error saying what the file must hold.
TEST(FencectlStoreTest, BatchTakesTheWholeRequestBodyOrItsWrites) {
  TempDir dir;
  FencedProcess fenced(dir.File("store.db"));
  std::vector<std::string> env = {"FENCEKIT_STORE=" + fenced.url()};
  auto ctl = [&](std::vector<std::string> args, const std::string& input) {
    args.insert(args.begin(), FencectlBinary());
    return RunCommand(args, env, input);
  };
  const std::string body = R"({"lock": "reports", "token": 7, "writes": [
      {"op": "put", "key": "reports/q3.pdf", "value_base64": "JVBERi0xLjcK"},
      {"op": "put", "key": "reports/index", "value": "q1 q2 q3"}]})";
  auto whole = ctl({"batch", "-"}, body);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto receipt = Json(whole.out);
  EXPECT_EQ(receipt["lock"].as_string(), "reports");
  EXPECT_EQ(receipt["token"].as_int64(), 7);
  EXPECT_EQ(receipt["writes"].as_array().size(), 2u);
  EXPECT_EQ(ctl({"get", "--raw", "reports/index"}, "").out, "q1 q2 q3");
  // Options that agree with the body are fine; ones that contradict it are refused.
  EXPECT_EQ(ctl({"batch", "--lock", "reports", "--token", "7", "-"}, body).exit_code, 0);
  auto contradicts = ctl({"batch", "--token", "8", "-"}, body);
  EXPECT_EQ(contradicts.exit_code, 64);
  EXPECT_NE(contradicts.err.find("gives the token \"7\" and --token \"8\""), std::string::npos)
      << contradicts.err;
  // A body without a lock or token takes them from the options.
  EXPECT_EQ(ctl({"batch", "--lock", "reports", "--token", "8", "-"},
                R"({"writes": [{"op": "delete", "key": "reports/index"}]})")
                .exit_code,
            0);
  // What the file must hold, said when it holds something else.
  const std::string must_hold = "must hold the body of POST /v1/batch";
  for (const std::string& wrong :
       {std::string(R"([{"op": "put", "key": "a", "value": "1"}])"),  // no lock, no token
        std::string(R"({"lock": "reports", "token": 9, "writes": 3})"), std::string("42"),
        std::string("not json")}) {
    auto r = ctl({"batch", "-"}, wrong);
    EXPECT_EQ(r.exit_code, 64) << wrong;
    EXPECT_NE(r.err.find(must_hold), std::string::npos) << wrong << ": " << r.err;
  }
}

}  // namespace
}  // namespace fencekit
