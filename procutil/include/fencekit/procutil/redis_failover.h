// A Redis primary with an asynchronous replica, behind one address that moves to the replica
// when it is promoted: the failover that loses the last grants (Redis Sentinel's, or a managed
// Redis's), made on demand.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fencekit/common/status.h"
#include "fencekit/procutil/delay_proxy.h"
#include "fencekit/procutil/redis_server.h"

namespace fencekit::procutil {

// Two redis-servers on loopback, one the other's replica (REPLICAOF through a proxy: the
// replication link, which can be cut), and a proxy in front of the primary: the address the
// clients use, as a virtual IP or a name Sentinel updates would be. Neither server persists
// anything; the replica keeps what it was sent. A cycle:
//   CutReplication()  from now on, what the primary is told never reaches the replica;
//   Failover()        the primary SIGKILLed, the replica promoted (REPLICAOF NO ONE), the
//                     address moved to it (open connections closed): it lacks every write
//                     made since the cut;
//   Rejoin()          the old primary restarted empty as the new primary's replica, once it
//                     has synchronised: ready for the next cycle.
// Thread safety: not safe for concurrent use.
class RedisFailoverPair {
 public:
  // Starts both servers (their files and logs in `dir`, which exists) and waits until the
  // replica has synchronised. kUnavailable, saying why, when either cannot start.
  Status Start(const std::string& dir);

  // "redis://127.0.0.1:<the address's port>"
  std::string uri() const;
  RedisServer& primary() { return servers_[primary_]; }
  RedisServer& replica() { return servers_[1 - primary_]; }

  void CutReplication();
  // kUnavailable when the replica refuses to be promoted (or does not answer).
  Status Failover();
  // kUnavailable when the old primary cannot restart or does not synchronise within 10 s.
  Status Rejoin();

 private:
  // Makes replica() a replica of primary() through the link, and waits until it has synced.
  Status Replicate();

  std::string dir_;
  RedisServer servers_[2];
  int primary_ = 0;
  std::unique_ptr<DelayProxy> link_;     // the replica's connection to the primary
  std::unique_ptr<DelayProxy> address_;  // the clients'
};

}  // namespace fencekit::procutil
