// Real etcd processes (Debian's etcd-server) for tests: one member or a cluster on loopback,
// data in a temporary folder, elections tuned for loopback (10ms heartbeat, 100ms election
// timeout, which also lets leases be as short as 1s).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace fencekit::testing {

// Not thread-safe: drive it from the test's own thread.
class EtcdCluster {
 public:
  // Starts `members` processes (1 = a single node) and waits up to 15s until every member
  // answers and they have a leader; fails the test if not, with the members' log tails.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();  // SIGKILLs every member and removes the data folders
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  std::uint16_t client_port(int member) const { return members_[member].client_port; }
  // "etcd://127.0.0.1:p0,127.0.0.1:p1,...": every member, killed ones included.
  std::string uri() const;
  // "etcd://127.0.0.1:p": that member alone.
  std::string member_uri(int member) const;
  // The index of the leader, as the running (neither killed nor paused) members see it; when
  // they disagree, the one reported with the highest raft term. Waits up to 10s for a leader
  // that is itself running; -1 when there is none.
  int Leader();
  // SIGKILL; the member stays down.
  void Kill(int member);
  // SIGSTOP / SIGCONT: the member hangs with its sockets open, as a paused process would.
  void Pause(int member);
  void Resume(int member);
  // Deletes `key` (plain bytes) through a running member; the number deleted, or -1 when no
  // member answered.
  long long DeleteKey(const std::string& key);

 private:
  struct Member {
    std::string name;
    std::uint16_t client_port = 0, peer_port = 0;
    pid_t pid = -1;  // -1 once killed
    bool paused = false;
    bool ready = false;  // answered once with a leader, during Start()
    std::string log;     // its stdout and stderr
  };
  // Starts every member and waits until ready. False (members killed) when a member exited
  // for a port taken since FreePort() and this is not the last attempt: the caller retries.
  // True otherwise, the test having failed if the cluster is not up.
  bool Start(bool last_attempt);
  // When a member has exited: kills the others and returns what Start() should return.
  std::optional<bool> ReapEarlyExit(bool last_attempt);
  // Fails the test with `what` and every member's log tail, kills the members; true.
  bool FailWithLogs(const std::string& what);
  // True when `member` answers, knows a leader, and is the process we started, not another
  // etcd that took its client port: its member list holds our peer URL.
  bool Ready(int member) const;
  void StopAll();
  bool Running(int member) const { return members_[member].pid > 0 && !members_[member].paused; }

  TempDir dir_;
  std::vector<Member> members_;
};

}  // namespace fencekit::testing
