#include "run/run_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/pausetest/pauser.h"

namespace fencekit::pausetest {

using std::chrono::milliseconds;
// Real time (not Clock) in this file: it plays schedules on, and reaps, real processes.
using SteadyClock = std::chrono::steady_clock;

namespace {

// The last token `server` granted for `lock`; 0 when it cannot say.
std::int64_t LastToken(procutil::RedisServer& server, const std::string& lock) {
  auto client = LockClient::Open("redis://127.0.0.1:" + std::to_string(server.port()));
  if (!client.ok()) return 0;
  auto info = (*client)->Inspect(lock);
  return info.ok() && info->last_token ? info->last_token->value() : 0;
}

std::string MissedGrants(std::int64_t granted, std::int64_t replicated) {
  if (granted == 0 || replicated == 0) return "the grants it missed are unknown";
  const std::string last = std::to_string(granted);
  if (granted == replicated) return "it had every grant (the last, token " + last + ")";
  if (granted == replicated + 1) return "it missed the last grant (token " + last + ")";
  return "it missed the last " + std::to_string(granted - replicated) + " grants (tokens " +
         std::to_string(replicated + 1) + " to " + std::to_string(granted) + ")";
}

}  // namespace

std::vector<Event> ScheduleOf(const PauseTestOptions& options, std::uint64_t run_seed,
                              int clients, int holds, bool failover_locks) {
  std::vector<Event> events;
  for (const auto& p : MakePauseSchedule(run_seed, clients, options.pauses_per_run,
                                         options.run_length, options.ttl)) {
    events.push_back({p.at, Event::kPause, p.target});
    events.push_back({p.at + p.length, Event::kResume, p.target});
  }
  // Holds draw from a seed of their own: adding them leaves the pauses where they were.
  for (const auto& h : MakePauseSchedule(run_seed ^ 0x9e3779b97f4a7c15ULL, clients, holds,
                                         options.run_length, options.ttl)) {
    events.push_back({h.at, Event::kHold, h.target});
    events.push_back({h.at + h.length, Event::kRelease, h.target});
  }
  // One fault at a seeded moment in the middle half of the run.
  auto middle = [&](std::uint64_t salt, Event::Kind kind) {
    std::mt19937_64 rng(run_seed ^ salt);
    auto quarter = options.run_length.count() / 4;
    events.push_back(
        {milliseconds(quarter + static_cast<long long>(rng() % (2 * quarter + 1))), kind, 0});
  };
  if (options.kill_store) middle(0x5bd1e995, Event::kKillStore);
  if (options.restart_locks) middle(0x27d4eb2f, Event::kRestartLocks);
  if (failover_locks) {
    std::mt19937_64 rng(run_seed ^ 0x2545f491);
    const long long eighth = options.run_length.count() / 8;
    const long long cut = 2 * eighth + static_cast<long long>(rng() % (2 * eighth + 1));
    const long long lag = eighth + static_cast<long long>(rng() % (eighth + 1));
    events.push_back({milliseconds(cut), Event::kCutReplication, 0});
    events.push_back({milliseconds(cut + lag), Event::kFailover, 0});
  }
  if (options.kill_etcd_leader) {
    std::mt19937_64 rng(run_seed ^ 0x165667b1);
    const long long eighth = options.run_length.count() / 8;
    const long long kill = 2 * eighth + static_cast<long long>(rng() % (2 * eighth + 1));
    const long long down = eighth + static_cast<long long>(rng() % (2 * eighth + 1));
    events.push_back({milliseconds(kill), Event::kKillEtcdLeader, 0});
    events.push_back({milliseconds(kill + down), Event::kRestartEtcdMember, 0});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.at < b.at; });
  return events;
}

Result<Played> PlaySchedule(const std::vector<Event>& events, milliseconds run_length,
                            const std::vector<pid_t>& clients, RunServers& servers,
                            const std::string& dir) {
  ProcessPauser pauser;
  // A hold stops the client's own process too (not its worker): its renewals are in the same
  // held network, so its lease runs out as a cut-off client's would.
  ProcessPauser renewers;
  auto leader = [&](int target) { return std::abs(clients[target]); };  // -pgid: its leader
  std::vector<int> depth(clients.size(), 0);  // overlapping pauses of one client nest
  std::vector<std::size_t> open_pause(clients.size(), 0);  // its entry in played.pauses
  std::vector<int> hold_depth(clients.size(), 0);
  std::vector<std::size_t> open_hold(clients.size(), 0);  // its entry in played.holds
  auto proxies_of = [&](int target) {
    std::vector<procutil::DelayProxy*> out;
    if (target >= 0 && target < static_cast<int>(servers.proxies.size())) {
      for (auto& p : servers.proxies[target]) out.push_back(p.get());
    }
    return out;
  };
  Status harness = Status::Ok();
  Played played;
  int killed_leader = -1;
  const auto start = SteadyClock::now();
  auto since_start = [&] {
    return std::to_string(
               std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count()) +
           "ms";
  };
  for (const Event& e : events) {
    if (e.at >= run_length) break;  // ResumeAll below ends the pauses still on
    std::this_thread::sleep_until(start + e.at);
    switch (e.kind) {
      case Event::kPause:
        if (e.target < static_cast<int>(clients.size()) && depth[e.target]++ == 0) {
          pauser.Pause(clients[e.target]);
          open_pause[e.target] = played.pauses.size();
          played.pauses.push_back({e.target, NowMicros(), 0});
        }
        break;
      case Event::kResume:
        if (e.target < static_cast<int>(clients.size()) && --depth[e.target] == 0) {
          pauser.Resume(clients[e.target]);
          if (hold_depth[e.target] > 0) {
            renewers.Pause(leader(e.target));  // still cut off
          } else if (renewers.paused(leader(e.target))) {
            renewers.Resume(leader(e.target));  // its hold ended during the pause
          }
          played.pauses[open_pause[e.target]].end_us = NowMicros();
        }
        break;
      case Event::kHold:
        if (e.target < static_cast<int>(clients.size()) && hold_depth[e.target]++ == 0) {
          for (auto* p : proxies_of(e.target)) p->HoldAll();
          renewers.Pause(leader(e.target));
          open_hold[e.target] = played.holds.size();
          played.holds.push_back({e.target, NowMicros(), 0});
        }
        break;
      case Event::kRelease:
        if (e.target < static_cast<int>(clients.size()) && --hold_depth[e.target] == 0) {
          for (auto* p : proxies_of(e.target)) p->Release();
          // Under a pause, the client stays stopped until the pause ends (kResume).
          if (depth[e.target] == 0) renewers.Resume(leader(e.target));
          played.holds[open_hold[e.target]].end_us = NowMicros();
        }
        break;
      case Event::kKillStore:  // SIGKILL, then the same database on the same port
        if (Status s = servers.store.Restart(); !s.ok()) harness = s;
        break;
      case Event::kRestartLocks:
        if (Status s = servers.redis.Restart(); !s.ok()) {
          harness = s;
        } else {
          played.lock_faults.push_back({NowMicros(), "restarted empty (SIGKILL)"});
        }
        break;
      case Event::kCutReplication:
        servers.redis_pair.CutReplication();
        played.lock_faults.push_back({NowMicros(), "replication to the replica cut"});
        break;
      case Event::kFailover: {
        // What the replica missed, in grants of the clients' lock (0: unknown).
        const std::int64_t granted = LastToken(servers.redis_pair.primary(), servers.lock);
        const std::int64_t replicated = LastToken(servers.redis_pair.replica(), servers.lock);
        if (Status s = servers.redis_pair.Failover(); !s.ok()) {
          harness = s;
        } else {
          played.lock_faults.push_back({NowMicros(), "primary SIGKILLed, replica promoted: " +
                                                          MissedGrants(granted, replicated)});
        }
        break;
      }
      case Event::kKillEtcdLeader:
        killed_leader = servers.etcd.Leader();
        if (killed_leader < 0) {
          harness = Status::Unavailable("the etcd cluster had no leader to kill for 10s; see " +
                                        dir + "/etcd/*.log");
        } else {
          servers.etcd.Kill(killed_leader);
          played.lock_faults.push_back(
              {NowMicros(), "leader m" + std::to_string(killed_leader) + " SIGKILLed"});
          played.faults += "etcd leader m" + std::to_string(killed_leader) + " SIGKILLed at " +
                           since_start() + "\n";
        }
        break;
      case Event::kRestartEtcdMember: {
        if (killed_leader < 0) break;
        // The survivors must have elected another leader meanwhile.
        int next = servers.etcd.Leader();
        if (next < 0 || next == killed_leader) {
          harness = Status::Unavailable(
              "after the etcd leader was killed, the other members elected no leader within "
              "10s; see " +
              dir + "/etcd/*.log");
        } else {
          played.faults += "m" + std::to_string(next) + " leader meanwhile; m" +
                           std::to_string(killed_leader) + " restarted at " + since_start();
          if (Status s = servers.etcd.Restart(killed_leader); !s.ok()) {
            harness = s;
          } else {
            played.etcd_leader_killed_and_back = true;
            played.lock_faults.push_back(
                {NowMicros(), "m" + std::to_string(killed_leader) + " back"});
            played.faults += ", back with a leader at " + since_start() + "\n";
          }
        }
        break;
      }
    }
  }
  std::this_thread::sleep_until(start + run_length);
  pauser.ResumeAll();
  renewers.ResumeAll();
  for (std::size_t c = 0; c < hold_depth.size(); ++c) {
    if (hold_depth[c] > 0) {
      for (auto* p : proxies_of(static_cast<int>(c))) p->Release();
    }
  }
  for (auto* list : {&played.pauses, &played.holds}) {
    for (auto& p : *list) {
      if (p.end_us == 0) p.end_us = NowMicros();
    }
  }
  if (!harness.ok()) return harness;
  return played;
}

}  // namespace fencekit::pausetest
