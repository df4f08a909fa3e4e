// The SQLite store's encoding of a transaction's decisions as one row (sqlite/history_run.h).
#include "sqlite/history_run.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fencekit::fencedstore {
namespace {

const auto kTime = std::chrono::system_clock::time_point(std::chrono::milliseconds(1234));

TEST(HistoryRunTest, ARunDecodesToItsDecisionsWithConsecutiveSeqsEndingAtItsLast) {
  const std::string binary("k\0\xff\x80", 4);
  HistoryRun run;
  run.Add("put", "lock", 7, binary, true, 7, "", "alice");
  run.Add("delete", std::string(300, 'l'), INT64_MAX, "", false, INT64_MAX, "stale_token", "");
  run.Add("set_fence", "other", 1, "", true, 1, "", "admin");
  ASSERT_EQ(run.size(), 3u);
  std::vector<Decision> out;
  ASSERT_TRUE(DecodeHistoryRun(run.bytes(), 42, kTime, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].seq, 40);
  EXPECT_EQ(out[0].op, "put");
  EXPECT_EQ(out[0].lock, "lock");
  EXPECT_EQ(out[0].token, 7);
  EXPECT_EQ(out[0].key, binary);
  EXPECT_TRUE(out[0].accepted);
  EXPECT_EQ(out[0].highest, 7);
  EXPECT_EQ(out[0].reason, "");
  EXPECT_EQ(out[0].principal, "alice");
  EXPECT_EQ(out[0].time, kTime);
  EXPECT_EQ(out[1].seq, 41);
  EXPECT_EQ(out[1].op, "delete");
  EXPECT_EQ(out[1].lock, std::string(300, 'l'));
  EXPECT_EQ(out[1].token, INT64_MAX);
  EXPECT_FALSE(out[1].accepted);
  EXPECT_EQ(out[1].highest, INT64_MAX);
  EXPECT_EQ(out[1].reason, "stale_token");
  EXPECT_EQ(out[2].seq, 42);
  EXPECT_EQ(out[2].op, "set_fence");
  EXPECT_EQ(out[2].principal, "admin");
  run.Clear();
  EXPECT_EQ(run.size(), 0u);
  EXPECT_TRUE(run.bytes().empty());
}

TEST(HistoryRunTest, ADamagedRunIsAnErrorAndAddsNothing) {
  HistoryRun run;
  run.Add("put", "lock", 300, "key", false, 301, "stale_token", "bob");
  const std::string whole(run.bytes());
  std::vector<std::string> damaged;
  for (std::size_t n = 0; n < whole.size(); ++n) damaged.push_back(whole.substr(0, n));
  damaged.push_back("\x02" + whole.substr(1));  // an unknown format
  damaged.push_back(whole + "\x05");            // a length past the end
  damaged.push_back(std::string("\x01\x03put\x04lock\x05\x03key\x02", 16));  // accepted is 2
  damaged.push_back(std::string("\x01") + std::string(11, '\xff'));          // an endless varint
  std::vector<Decision> out;
  for (const auto& bytes : damaged) {
    Status s = DecodeHistoryRun(bytes, 9, kTime, &out);
    EXPECT_TRUE(s.IsIoError()) << testing::PrintToString(bytes);
    EXPECT_NE(s.message().find("ending at seq 9"), std::string::npos);
    EXPECT_TRUE(out.empty());
  }
  // More decisions than seqs up to its last.
  Status s = DecodeHistoryRun(whole, 0, kTime, &out);
  EXPECT_TRUE(s.IsIoError());
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace fencekit::fencedstore
