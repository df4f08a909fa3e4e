// Real etcd processes (Debian's etcd-server): one member or a cluster on loopback, elections
// tuned for loopback (10ms heartbeat, 100ms election timeout, which also lets leases be as
// short as 1s); optionally serving clients over TLS, and with authentication enabled.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
  // Both set: clients are served HTTPS on client_port() with this PEM certificate and key,
  // and each member also serves plain HTTP on admin_port() (loopback), which this class uses
  // for its own calls.
  std::string tls_cert_file, tls_key_file;
  // With TLS: clients must present a certificate signed by this PEM CA (--client-cert-auth).
  std::string client_ca_file;
  // etcd's --auth-token-ttl: an auth token unused this long expires. 0: etcd's (300s).
  std::chrono::seconds auth_token_ttl{0};
};

// A user that EnableAuth adds.
struct EtcdUser {
  std::string name, password;  // A-Z a-z 0-9 . _ - only
  // The user's role (named after it) grants readwrite on the keys starting with this; empty:
  // the user has no role and may do nothing.
  std::string readwrite_prefix;
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
  // Plain HTTP: client_port(), or with TLS the member's extra loopback port.
  std::uint16_t admin_port(int member) const { return members_[member].admin_port; }
  // "etcd://127.0.0.1:p0,127.0.0.1:p1,..." ("etcds://" with TLS): every member, killed ones
  // included; member `first` (when >= 0) first, so that a client talks to it until it dies.
  std::string uri(int first = -1) const;
  // "etcd://127.0.0.1:p" ("etcds://" with TLS): that member alone.
  std::string member_uri(int member) const;
  // Adds the root user (password `root_password`) and `users`, then turns authentication on.
  // This class's own calls then authenticate as root. kInvalidArgument for a name or password
  // outside A-Z a-z 0-9 . _ -; kUnavailable naming the call etcd refused.
  Status EnableAuth(const std::string& root_password, const std::vector<EtcdUser>& users);
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
  // The number of keys starting with `prefix` (plain bytes), or -1 when no member answered.
  long long CountKeys(const std::string& prefix);

 private:
  struct Member {
    std::string name;
    std::uint16_t client_port = 0, peer_port = 0;
    std::uint16_t admin_port = 0;  // == client_port without TLS
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
  bool Tls() const { return !options_.tls_cert_file.empty(); }
  // A JSON call through the first running member's admin port, as root once auth is on; the
  // reply's body, or "" when none answered with 200.
  std::string AdminCall(std::string_view target, const std::string& body);

  EtcdOptions options_;
  std::string made_dir_;  // removed by the destructor
  std::vector<Member> members_;
  std::string initial_cluster_;  // --initial-cluster, "m0=http://127.0.0.1:p,..."
  std::string cluster_token_;    // --initial-cluster-token
  std::string root_password_;    // set by EnableAuth
};

}  // namespace fencekit::procutil
