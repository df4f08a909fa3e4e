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

class EtcdCluster {
 public:
  // Starts `members` processes and waits until they have a leader; fails the test if not.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();  // SIGKILLs every member
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  std::uint16_t client_port(int member) const { return members_[member].client_port; }
  // "etcd://127.0.0.1:p0,127.0.0.1:p1,...": every member.
  std::string uri() const;
  // The member that is leader now, asked of the live members; waits up to 10s for an election.
  // -1 when there is none.
  int Leader();
  // SIGKILL; the member stays down.
  void Kill(int member);
  // SIGSTOP / SIGCONT.
  void Pause(int member);
  void Resume(int member);
  // Deletes `key` (plain bytes) through a live member; the number deleted, or -1 on error.
  long long DeleteKey(const std::string& key);

 private:
  struct Member {
    std::string name;
    std::uint16_t client_port = 0, peer_port = 0;
    pid_t pid = -1;
    std::string log;
  };
  // Starts every member; false (members killed) when one exits at once, e.g. a port clash.
  bool Start(bool last_attempt);
  void StopAll();
  // POSTs `body` to a member's gateway; the reply body, or "" on any error.
  std::string Post(int member, const std::string& target, const std::string& body) const;

  TempDir dir_;
  std::vector<Member> members_;
};

}  // namespace fencekit::testing
