// Real etcd processes (Debian's etcd-server) for tests: one member or a cluster on loopback,
// data in a temporary folder, elections tuned for loopback (10ms heartbeat, 100ms election
// timeout, which also lets leases be as short as 1s).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace fencekit::testing {

// Not thread-safe: drive it from the test's own thread.
class EtcdCluster {
 public:
  // Starts `members` processes (1 = a single node) and waits up to 15s until every member
  // answers and they have a leader; fails the test if not, with the failing member's log.
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
    std::string log;  // its stdout and stderr
  };
  // Starts every member and waits until ready. False (members killed) when a member exited
  // for a port taken since FreePort() and this is not the last attempt; the caller retries.
  bool Start(bool last_attempt);
  // True when `member` answers, knows a leader, and is the process we started, not another
  // etcd that took its client port: its member list holds our peer URL.
  bool Ready(int member) const;
  void StopAll();
  bool Running(int member) const { return members_[member].pid > 0 && !members_[member].paused; }
  // POSTs JSON `body` to a member's gateway; the reply body, or "" on any error or non-200.
  std::string Post(int member, const std::string& target, const std::string& body) const;

  TempDir dir_;
  std::vector<Member> members_;
};

}  // namespace fencekit::testing
