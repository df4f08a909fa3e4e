// Real etcd processes (Debian's etcd-server): one member or a cluster on loopback, elections
// tuned for loopback (10ms heartbeat, 100ms election timeout, which also lets leases be as
// short as 1s).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct EtcdOptions {
  int members = 1;
  // Data folders and logs go here (created if missing). Empty: a new folder under $TMPDIR (or
  // /tmp), removed by the destructor.
  std::string dir;
  std::string binary = "etcd";
  std::chrono::milliseconds start_timeout{15'000};
};

// Thread safety: not safe for concurrent use.
class EtcdCluster {
 public:
  EtcdCluster() = default;
  ~EtcdCluster();  // SIGKILLs every member; removes the folder it made
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts the members, each once the previous one serves its peers, and waits until every
  // member answers, knows a leader and lists our peer URL (so it is the process started here,
  // not another etcd on its port). kUnavailable with the members' log tails if not.
  Status Start(EtcdOptions options = {});

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
  // SIGKILL; the member stays down until Restart().
  void Kill(int member);
  // SIGKILLs the member if it runs, then starts it again as it was: same name, data folder,
  // ports and peer URLs, so it rejoins the cluster with what it had on disk. Waits (up to the
  // start timeout) until it answers and knows a leader. kInvalidArgument for a member that does
  // not exist; kUnavailable with its log tail when it exits or does not get there in time, and
  // it is then down.
  Status Restart(int member);
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
    ChildProcess process;
    bool paused = false;
    bool ready = false;  // answered once with a leader, since it was last started
    std::string log;     // its stdout and stderr
  };
  // One attempt with fresh ports; sets `*port_taken` when a member exited because a port was
  // taken since FreeLoopbackPort(), so that another attempt may succeed.
  Status StartOnce(bool* port_taken);
  // Starts the member's process with its flags (data folder kept).
  Status Launch(Member& m);
  // When a member has exited: kills the others and says why.
  std::optional<Status> ReapEarlyExit(bool* port_taken);
  // kUnavailable with `what` and every member's log tail; kills the members.
  Status FailWithLogs(const std::string& what);
  bool Ready(int member) const;
  void StopAll();
  bool Running(int member) const {
    return members_[member].process.pid() > 0 && !members_[member].paused;
  }

  EtcdOptions options_;
  std::string made_dir_;  // removed by the destructor
  std::vector<Member> members_;
  std::string initial_cluster_;  // --initial-cluster, "m0=http://127.0.0.1:p,..."
  std::string cluster_token_;    // --initial-cluster-token
};

}  // namespace fencekit::procutil
