#include "fencekit/pausetest/checker.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace fencekit::pausetest {

CheckReport CheckHistory(const CheckInput& input) {
  CheckReport report;
  std::vector<Decision> log = input.store_log;
  std::sort(log.begin(), log.end(),
            [](const Decision& a, const Decision& b) { return a.seq < b.seq; });

  // (a) In commit order, no accepted token below the highest accepted before it for its lock.
  std::map<std::string, std::int64_t> highest;
  std::set<std::tuple<std::string, std::string, std::int64_t>> accepted;  // lock, key, token
  std::map<std::string, int> accepted_per_key;
  for (const Decision& d : log) {
    if (!d.accepted) continue;
    accepted.emplace(d.lock, d.key, d.token);
    ++accepted_per_key[d.key];
    auto [it, first] = highest.emplace(d.lock, d.token);
    if (!first && d.token < it->second) {
      ++report.stale_accepted;
      report.violations.push_back("store seq " + std::to_string(d.seq) + ": accepted token " +
                                  std::to_string(d.token) + " for lock \"" + d.lock + "\" (key \"" +
                                  d.key + "\") after token " + std::to_string(it->second));
    }
    it->second = std::max(it->second, d.token);
  }

  // (b) Every acknowledged write is in the store's log as accepted.
  std::map<std::string, int> acked_per_key;
  std::set<std::string> counter_keys;
  std::set<std::pair<int, std::int64_t>> expired;  // client, token
  for (const HistoryOp& op : input.history) {
    if ((op.lease_expired || op.outcome == "not_held") && op.token != 0) {
      expired.emplace(op.client, op.token);
    }
    if (op.op != "write" && op.op != "claim") continue;
    if (op.op == "write") counter_keys.insert(op.key);
    if (op.outcome != "ok") continue;
    ++report.acknowledged_writes;
    if (op.op == "write") ++acked_per_key[op.key];
    if (!accepted.count({op.lock, op.key, op.token})) {
      ++report.missing_acknowledged;
      report.violations.push_back(
          "client " + std::to_string(op.client) + "'s acknowledged " + op.op + " of \"" + op.key +
          "\" with token " + std::to_string(op.token) + " is not in the store's log as accepted");
    }
  }
  report.expired_leases = static_cast<int>(expired.size());

  // (c) Each accepted increment adds one: fewer on the counter means some were lost.
  for (const std::string& key : counter_keys) {
    int increments = std::max(acked_per_key[key], accepted_per_key[key]);
    auto it = input.final_counters.find(key);
    std::int64_t final_value = it == input.final_counters.end() ? 0 : it->second;
    // At most every increment is lost: a counter below 0 (a corrupt or hostile value) must not
    // overflow the subtraction, nor be a violation when no increment was accepted.
    int lost = static_cast<int>(increments - std::clamp<std::int64_t>(final_value, 0, increments));
    if (lost > 0) {
      report.lost_updates += lost;
      report.violations.push_back("counter \"" + key + "\" is " + std::to_string(final_value) +
                                  " after " + std::to_string(increments) +
                                  " accepted increments: " + std::to_string(lost) + " lost");
    }
  }
  return report;
}

}  // namespace fencekit::pausetest
