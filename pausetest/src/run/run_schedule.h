// What happens during one pause run, and when: the pauses of the clients, the holds of their
// traffic in the network, and the faults of the servers (a store killed, Redis restarted,
// etcd's leader killed), seeded, then played.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/pausetest/runner.h"
#include "fencekit/procutil/delay_proxy.h"
#include "fencekit/procutil/etcd_cluster.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/redis_failover.h"
#include "fencekit/procutil/redis_server.h"

namespace fencekit::pausetest {

struct Event {
  std::chrono::milliseconds at;  // from the run's start
  enum Kind {
    kPause,
    kResume,
    kKillStore,
    kRestartLocks,
    kKillEtcdLeader,
    kRestartEtcdMember,
    kHold,    // the client's traffic through its proxies stops, both ways
    kRelease,  // and flows again
    kCutReplication,  // the Redis replica stops receiving the primary's writes
    kFailover         // the primary SIGKILLed, the replica promoted in its place
  } kind;
  int target = 0;  // the client, for kPause, kResume, kHold and kRelease
};

// The events of the run seeded `run_seed` with `clients` clients, in time order: the pause
// schedule (MakePauseSchedule), `holds` holds of a client's traffic (each 0.5-3x the ttl, seeded
// apart from the pauses) and the faults `options` asks for; with `failover_locks`, replication
// cut at a seeded moment in the run's second quarter and the failover 1/8 to 1/4 of the run
// later.
std::vector<Event> ScheduleOf(const PauseTestOptions& options, std::uint64_t run_seed, int clients,
                              int holds = 0, bool failover_locks = false);

// The servers one run owns (those `options` does not start stay unstarted).
struct RunServers {
  procutil::FencedServer store;
  procutil::RedisServer redis;
  procutil::RedisFailoverPair redis_pair;  // for kCutReplication and kFailover
  std::string lock;  // the clients' lock: a failover's account names the grants it lost
  procutil::EtcdCluster etcd;
  // Per client, the proxies its traffic goes through (kHold holds them all).
  std::vector<std::vector<std::unique_ptr<procutil::DelayProxy>>> proxies;
};

// What playing a schedule did to the lock service, for the run's report.
struct Played {
  std::string faults;  // one line per fault, with its time
  bool etcd_leader_killed_and_back = false;
  // Each pause as played (overlapping ones of a client merged), in wall-clock microseconds.
  struct Pause {
    int target = 0;
    std::int64_t start_us = 0, end_us = 0;
  };
  std::vector<Pause> pauses;
  std::vector<Pause> holds;  // the same, for the holds of a client's traffic
  // Each fault of the lock service as played: when (wall-clock microseconds) and what.
  struct Fault {
    std::int64_t at_us = 0;
    std::string what;
  };
  std::vector<Fault> lock_faults;
};

// Plays `events` up to `run_length` on `clients` (pids; -pgid stops a whole process group) and
// `servers`, then resumes every client still paused. A fault that could not be made (no etcd
// leader, a restart that failed) is the error; the run's folder `dir` names where its logs are.
Result<Played> PlaySchedule(const std::vector<Event>& events, std::chrono::milliseconds run_length,
                            const std::vector<pid_t>& clients, RunServers& servers,
                            const std::string& dir);

}  // namespace fencekit::pausetest
