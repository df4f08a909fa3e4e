// The guards fencekit ships, each behind one adapter (Guard) for the conformance suite
// (guard_conformance_test.cc): what a guard decided, and how the suite drives one on a real
// server of its own. The adapters: guard_adapters_sql.cc (SQLite, PostgreSQL, MariaDB) and
// guard_adapters_kv.cc (Redis, etcd through the C++ API and the shell script, fenced).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "support/test_support.h"

namespace fencekit::guards {

using testing::ReadWholeFile;

inline std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

inline std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// What a guard decided.
enum class Outcome { kAccepted, kStale, kBad, kFailed, kNotApplicable };

inline const char* Name(Outcome o) {
  switch (o) {
    case Outcome::kAccepted:
      return "accepted";
    case Outcome::kStale:
      return "stale";
    case Outcome::kBad:
      return "bad";
    case Outcome::kFailed:
      return "failed";
    default:
      return "not applicable";
  }
}


struct Answer {
  Outcome outcome = Outcome::kFailed;
  std::string detail;  // the store's code and message, as it said them
};

// A token as the caller sends it: text, or (`blob`) bytes where the store tells them apart.
struct Token {
  std::string bytes;
  bool blob = false;
};

// One guard on a server of its own. Advance may run on several threads at once.
class Guard {
 public:
  virtual ~Guard() = default;
  // In one transaction: advance `lock`'s fence to `token`, then write `value` as the lock's
  // data (appended to its log where the store keeps one). `fail_after`: that write fails after
  // the advance, and nothing of the transaction may stay.
  virtual Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                         bool fail_after) = 0;
  // The fence's value; nullopt when there is none.
  virtual std::optional<std::int64_t> Fence(const std::string& lock) = 0;
  // What the accepted writes of `lock` left, in commit order: the log where the store keeps
  // one, else the data's last value alone.
  virtual std::vector<std::string> Writes(const std::string& lock) = 0;
  // Stops the server (as a crash where it can) and starts it on the same data.
  virtual Status Restart() = 0;
  // Names are text (valid UTF-8, no NUL) in this store: others are refused before the guard.
  virtual bool TextNames() const { return false; }
  // Whether a name or token with a NUL byte can be passed at all (not through argv).
  virtual bool TakesNul() const { return true; }
  // Whether a data write can fail after the guard's check in this store.
  virtual bool CanFailAfterCheck() const { return true; }
  // "lock" or "fence key": what the refusal's message names.
  virtual std::string NamedAs() const { return "lock"; }
  // Whether the refusal's message names the token and the highest (SQLite 3.40's RAISE cannot).
  virtual bool MessageHasNumbers() const { return true; }
  // Whether a refusal is the contract's message (fenced answers in JSON instead).
  virtual bool SaysFence() const { return true; }
  // Cases of this guard alone, run after the common ones (PostgreSQL: a temporary table named
  // as the fences cannot stand in); they fail the current test.
  virtual void CheckItsOwnCases() {}
  // The highest token a stale refusal names.
  virtual std::optional<std::int64_t> HighestOf(const Answer& a) const {
    const std::string marker = ": the highest is ";
    const auto at = a.detail.rfind(marker);
    if (at == std::string::npos) return std::nullopt;
    return std::stoll(a.detail.substr(at + marker.size()));
  }
};

// The adapter of guard `name` ("sqlite", "postgresql", "mariadb"; or "redis", "etcd_api",
// "etcd_script", "fenced"), its files in `dir`; null for another name.
std::unique_ptr<Guard> MakeSqlGuard(const std::string& name, const std::string& dir);
std::unique_ptr<Guard> MakeKvGuard(const std::string& name, const std::string& dir);

}  // namespace fencekit::guards
