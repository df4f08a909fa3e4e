// What the auth tests share (http_auth_test.cc, http_auth_setup_test.cc): the principals' tokens
// and the auth file made from their digests, and reading an error's name.
#pragma once

#include <boost/json/parse.hpp>
#include <fstream>
#include <string>
#include <utility>

#include "support/server_fixture.h"
#include "support/test_support.h"

namespace fencekit::authtest {

using testing::CommandResult;
using testing::RawResponse;
using testing::RunCommand;
using testing::TempDir;

inline constexpr const char* kBillingToken = "billing-token-0123456789abcdef";
inline constexpr const char* kReaderToken = "reader.token~+/=";
inline constexpr const char* kOpsToken = "ops-token-fedcba9876543210";
inline constexpr const char* kScribeToken = "scribe-token-00112233445566";

// The digest as the docs tell an operator to make it.
inline std::string Sha256Hex(const std::string& token) {
  CommandResult r =
      RunCommand({"sh", "-c", "printf %s \"$T\" | sha256sum | cut -d' ' -f1"}, {"T=" + token});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  EXPECT_EQ(r.out.size(), 64u) << r.out;
  return r.out;
}

inline std::string WriteFile(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.File(name);
  std::ofstream(path) << text;
  return path;
}

// billing reads and writes billing/; reader only reads shared/; scribe only writes jobs/; ops
// is admin.
inline std::string AuthJson() {
  return R"({"principals": [
    {"name": "billing", "token_sha256": ")" +
         Sha256Hex(kBillingToken) + R"(", "read": ["billing/"], "write": ["billing/"]},
    {"name": "reader", "token_sha256": ")" +
         Sha256Hex(kReaderToken) + R"(", "read": ["shared/"]},
    {"name": "scribe", "token_sha256": ")" +
         Sha256Hex(kScribeToken) + R"(", "write": ["jobs/"]},
    {"name": "ops", "token_sha256": ")" +
         Sha256Hex(kOpsToken) + R"(", "admin": true}
  ]})";
}

inline std::pair<std::string, std::string> Bearer(const std::string& token) {
  return {"Authorization", "Bearer " + token};
}

inline std::string ErrorName(const RawResponse& r) {
  boost::system::error_code ec;
  auto v = boost::json::parse(r.body, ec);
  if (ec || !v.is_object() || !v.as_object().contains("error")) return "(not an error: " + r.body;
  return std::string(v.as_object().at("error").as_string());
}

}  // namespace fencekit::authtest
