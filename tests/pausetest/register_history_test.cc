// The register history's line format, as users' workers write it (register_history.h): what
// parses, what is refused and how, and the file reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/pausetest/register_history.h"
#include "support/test_support.h"

namespace fencekit::pausetest {
namespace {

using namespace std::chrono_literals;
using Kind = RegisterOp::Kind;
using Outcome = RegisterOp::Outcome;

TEST(RegisterHistoryParseTest, ParsesARead) {
  auto op = ParseRegisterOp(
      R"({"op":"read","key":"counter","value":"5","start_us":10,"end_us":20,"outcome":"ok"})", 3);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(op->kind, Kind::kRead);
  EXPECT_EQ(op->client, 3);
  EXPECT_EQ(op->key, "counter");
  EXPECT_EQ(op->value, "5");
  EXPECT_EQ(op->start_us, 10);
  EXPECT_EQ(op->end_us, 20);
  EXPECT_EQ(op->outcome, Outcome::kOk);
}

TEST(RegisterHistoryParseTest, ParsesAWriteWithItsOwnClient) {
  auto op = ParseRegisterOp(
      R"({"op":"write","key":"k","value":6,"start_us":1,"end_us":1,"outcome":"unknown",)"
      R"("client":7,"extra":[1,2]})",
      3);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(op->kind, Kind::kWrite);
  EXPECT_EQ(op->client, 7);
  EXPECT_EQ(op->value, "6");
  EXPECT_EQ(op->outcome, Outcome::kUnknown);
}

TEST(RegisterHistoryParseTest, ParsesACas) {
  auto op = ParseRegisterOp(
      R"({"op":"cas","key":"k","from":5,"value":"6","start_us":1,"end_us":2,"outcome":"fail"})", 0);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(op->kind, Kind::kCas);
  EXPECT_EQ(op->from, "5");
  EXPECT_EQ(op->value, "6");
  EXPECT_EQ(op->outcome, Outcome::kFail);
}

TEST(RegisterHistoryParseTest, NumbersAndStringsAreEqualAsText) {
  auto a = ParseRegisterOp(
      R"({"op":"read","key":"k","value":-42,"start_us":1,"end_us":2,"outcome":"ok"})", 0);
  auto b = ParseRegisterOp(
      R"({"op":"read","key":"k","value":"-42","start_us":1,"end_us":2,"outcome":"ok"})", 0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->value, b->value);
}

TEST(RegisterHistoryParseTest, NullIsAbsent) {
  auto op = ParseRegisterOp(
      R"({"op":"cas","key":"k","from":null,"value":1,"start_us":1,"end_us":2,"outcome":"ok"})", 0);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(op->from, std::nullopt);
  EXPECT_EQ(op->value, "1");
}

TEST(RegisterHistoryParseTest, RefusesMissingAndInvalidFields) {
  const std::string good_times = R"("start_us":1,"end_us":2,"outcome":"ok")";
  struct Case {
    std::string line;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"not json", "not a JSON object"},
      {"[1,2]", "not a JSON object"},
      {R"({"key":"k","value":1,)" + good_times + "}", "\"op\" is missing"},
      {R"({"op":"delete","key":"k","value":1,)" + good_times + "}", "\"op\" must be"},
      {R"({"op":"read","value":1,)" + good_times + "}", "\"key\" is missing"},
      {R"({"op":"read","key":"","value":1,)" + good_times + "}", "\"key\" is empty"},
      {R"({"op":"read","key":"k",)" + good_times + "}", "\"value\" is missing"},
      {R"({"op":"read","key":"k","value":1.5,)" + good_times + "}", "not a float"},
      {R"({"op":"write","key":"k","value":true,)" + good_times + "}", "not a boolean"},
      {R"({"op":"write","key":"k","value":{},)" + good_times + "}", "not an object"},
      {R"({"op":"write","key":"k","value":[],)" + good_times + "}", "not an array"},
      {R"({"op":"cas","key":"k","value":1,)" + good_times + "}", "\"from\" is missing"},
      {R"({"op":"read","key":"k","value":1,"start_us":"1","end_us":2,"outcome":"ok"})",
       "\"start_us\" must be an integer"},
      {R"({"op":"read","key":"k","value":1,"start_us":1,"outcome":"ok"})", "\"end_us\" is missing"},
      {R"({"op":"read","key":"k","value":1,"start_us":1,"end_us":2,"outcome":"maybe"})",
       "\"outcome\" must be"},
      {R"({"op":"read","key":"k","value":1,"client":"x",)" + good_times + "}",
       "\"client\" must be an integer"},
  };
  for (const Case& c : cases) {
    auto op = ParseRegisterOp(c.line, 0);
    ASSERT_FALSE(op.ok()) << c.line;
    EXPECT_TRUE(op.status().IsInvalidArgument()) << c.line;
    EXPECT_NE(op.status().message().find(c.says), std::string::npos)
        << c.line << " gave: " << op.status().message();
  }
}

TEST(RegisterHistoryParseTest, RefusesStartAfterEnd) {
  auto op = ParseRegisterOp(
      R"({"op":"read","key":"k","value":1,"start_us":5,"end_us":4,"outcome":"ok"})", 0);
  ASSERT_FALSE(op.ok());
  EXPECT_NE(op.status().message().find("start_us 5 is after end_us 4"), std::string::npos)
      << op.status().message();
}

TEST(RegisterHistoryParseTest, LongGarbageIsNotEchoedWhole) {
  std::string garbage(10000, 'x');
  garbage[3] = '\x1b';
  garbage[5] = '\x07';
  auto op = ParseRegisterOp(garbage, 0);
  ASSERT_FALSE(op.ok());
  const std::string m = op.status().message();  // status() is a copy
  EXPECT_LT(m.size(), 200u) << m;
  EXPECT_NE(m.find("\\x1b"), std::string::npos) << m;
  EXPECT_TRUE(std::none_of(m.begin(), m.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20;
  })) << m;
}

class RegisterHistoryFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::string path = dir_.File("history.jsonl");
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(RegisterHistoryFileTest, AMissingFileIsAnEmptyHistory) {
  auto ops = ReadRegisterHistory(dir_.File("never-written.jsonl"), 1);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  EXPECT_TRUE(ops->empty());
}

TEST_F(RegisterHistoryFileTest, ReadsLinesSkippingBlankOnesAndRemembersLineNumbers) {
  std::string path =
      Write(R"({"op":"write","key":"k","value":1,"start_us":1,"end_us":2,"outcome":"ok"})"
            "\n\n   \n"
            R"({"op":"read","key":"k","value":1,"start_us":3,"end_us":4,"outcome":"ok","client":9})"
            "\n");
  auto ops = ReadRegisterHistory(path, 4);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  ASSERT_EQ(ops->size(), 2u);
  EXPECT_EQ((*ops)[0].line, 1);
  EXPECT_EQ((*ops)[0].client, 4);
  EXPECT_EQ((*ops)[1].line, 4);
  EXPECT_EQ((*ops)[1].client, 9);
}

TEST_F(RegisterHistoryFileTest, AMalformedLineIsNamedWithTheFile) {
  std::string path =
      Write(R"({"op":"write","key":"k","value":1,"start_us":1,"end_us":2,"outcome":"ok"})"
            "\n\n"
            R"({"op":"read","value":1,"start_us":3,"end_us":4,"outcome":"ok"})"
            "\n");
  auto ops = ReadRegisterHistory(path, 0);
  ASSERT_FALSE(ops.ok());
  EXPECT_TRUE(ops.status().IsInvalidArgument());
  EXPECT_NE(ops.status().message().find(path + " line 3: field \"key\" is missing"),
            std::string::npos)
      << ops.status().message();
}

TEST_F(RegisterHistoryFileTest, MoreThanMaxOpsIsRefused) {
  std::string text;
  for (int i = 0; i < 5; ++i) {
    text += R"({"op":"write","key":"k","value":1,"start_us":1,"end_us":2,"outcome":"ok"})"
            "\n";
  }
  std::string path = Write(text);
  EXPECT_TRUE(ReadRegisterHistory(path, 0, 5).ok());
  auto ops = ReadRegisterHistory(path, 0, 4);
  ASSERT_FALSE(ops.ok());
  EXPECT_NE(ops.status().message().find("line 5: more than 4 operations"), std::string::npos)
      << ops.status().message();
}

TEST(RegisterHistoryDescribeTest, IsOneLineWithTimesSinceTheOrigin) {
  RegisterOp op;
  op.client = 2;
  op.kind = Kind::kCas;
  op.key = "counter";
  op.from = "5";
  op.value = "6";
  op.start_us = 1'012'345'678;
  op.end_us = 1'012'601'000;
  op.line = 7;
  EXPECT_EQ(Describe(op, 1'000'000'000),
            "client 2 cas counter 5 -> 6 (ok) 12.345-12.601 s [line 7]");
  op.kind = Kind::kRead;
  op.value = std::nullopt;
  op.outcome = Outcome::kUnknown;
  op.line = 0;
  EXPECT_EQ(Describe(op, 1'000'000'000), "client 2 read counter -> null (unknown) 12.345-12.601 s");
}

}  // namespace
}  // namespace fencekit::pausetest
