// What the operations tests share (http_ops_test.cc, http_health_test.cc): a server's log lines
// as its sink received them, an auth file, and the fixture.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/server_fixture.h"
#include "support/test_support.h"

namespace fencekit::httpapi {

using namespace std::chrono_literals;

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
    testing::WaitFor(
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
inline std::string AuthFile(const testing::TempDir& dir) {
  std::string path = dir.File("auth.json");
  std::ofstream(path) << R"({"principals": [
      {"name": "user", "read": ["k/"], "write": ["k/"], "token_sha256":
       "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"},
      {"name": "admin", "admin": true, "token_sha256":
       "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c"}]})";
  return path;
}

inline const std::pair<std::string, std::string> kUser = {"Authorization", "Bearer t"};

class OpsTest : public testing::ServerFixture {
 protected:
  Lines lines_;
};

}  // namespace fencekit::httpapi
