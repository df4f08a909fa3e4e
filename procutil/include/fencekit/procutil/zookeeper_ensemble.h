// Real Apache ZooKeeper processes (Debian's zookeeper package, its jars run by java directly):
// a quorum ensemble, or one standalone server, on loopback, with ticks short enough for tests
// (100ms by default: sessions from 200ms to 2s, failover within a second or two).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct ZookeeperOptions {
  // 1: a standalone server; more: a quorum ensemble (3 members survive one down).
  int members = 3;
  // Configurations, data folders and logs go here (created if missing). Empty: a new folder
  // under $TMPDIR (or /tmp), removed by the destructor.
  std::string dir;
  std::chrono::milliseconds start_timeout{60'000};
  // ZooKeeper's tickTime. Sessions are bounded to [2, 20] ticks (ZooKeeper's defaults, written
  // out in each zoo.cfg): a client asking for more gets 20 ticks, and for less 2.
  int tick_ms = 100;
  // > 0: the longest session the members grant (maxSessionTimeout), instead of 20 ticks; short
  // ticks (fast failover) with leases of any length.
  std::chrono::milliseconds max_session_timeout{0};
  std::string java = "java";
};

// Thread safety: not safe for concurrent use.
class ZookeeperEnsemble {
 public:
  ZookeeperEnsemble() = default;
  ~ZookeeperEnsemble();  // SIGKILLs every member; removes the folder it made
  ZookeeperEnsemble(const ZookeeperEnsemble&) = delete;
  ZookeeperEnsemble& operator=(const ZookeeperEnsemble&) = delete;

  // Starts every member at once on fresh loopback ports, with empty data folders, and waits
  // until each answers `srvr` on its client port as leader or follower (standalone for one
  // member). kInvalidArgument for members or tick_ms below 1; kUnavailable with the members'
  // log tails if they do not get there within the start timeout.
  Status Start(ZookeeperOptions options = {});

  int size() const { return static_cast<int>(members_.size()); }
  std::uint16_t client_port(int member) const { return members_[member].client_port; }
  // "127.0.0.1:p0,127.0.0.1:p1,...": every member, killed ones included; member `first` (when
  // >= 0) first.
  std::string connect_string(int first = -1) const;
  // The index of the leader among the running (neither killed nor paused) members: the one
  // whose `srvr` says leader (standalone, for one member); when two do (a resumed old leader
  // that has not yet stepped down), the one of the newest epoch. Waits up to 10s for one; -1
  // when there is none.
  int Leader();
  // SIGKILL; the member stays down until Restart().
  void Kill(int member);
  // SIGKILLs the member if it runs, then starts it again as it was: same id, data folder and
  // ports, so it rejoins with what it had on disk. Waits (up to the start timeout) until it
  // serves as leader or follower, which takes a quorum of running members. kInvalidArgument
  // for a member that does not exist; kUnavailable with its log tail when it exits, loses a
  // port to another process, or does not serve in time; it is then down.
  Status Restart(int member);
  // SIGSTOP / SIGCONT: the member hangs with its sockets open, as a paused process would.
  void Pause(int member);
  void Resume(int member);
  // Kills every member, empties their data folders (each keeps its myid) and starts them
  // again on the same ports: a brand-new empty ensemble, as Start() waits for it.
  // kInvalidArgument before Start(); kUnavailable as Start(), without trying other ports.
  Status Wipe();

  // The session timeouts the members grant: 2 ticks, and 20 ticks or max_session_timeout.
  std::chrono::milliseconds min_session_timeout() const {
    return std::chrono::milliseconds(2 * options_.tick_ms);
  }
  std::chrono::milliseconds max_session_timeout() const {
    return options_.max_session_timeout.count() > 0
               ? options_.max_session_timeout
               : std::chrono::milliseconds(20 * options_.tick_ms);
  }

 private:
  struct Member {
    std::string name;  // "zk0", ...; its ZooKeeper id (myid) is its index + 1
    std::uint16_t client_port = 0, peer_port = 0, election_port = 0;
    ChildProcess process;
    bool paused = false;
    bool ready = false;             // served once, since it was last started
    std::string config, data, log;  // its zoo.cfg, dataDir, stdout and stderr
    std::uintmax_t log_start = 0;   // the log's size when it was last started
  };
  // One attempt with fresh ports; sets `*port_taken` when a member lost a port to another
  // process since FreeLoopbackPort(), so that another attempt may succeed.
  Status StartOnce(bool* port_taken);
  // Empties the member's data folder; its myid is written again.
  Status ResetData(int member) const;
  Status WriteConfig(const Member& m) const;
  // Starts every member, then waits until each serves.
  Status LaunchAllAndWait(bool* port_taken);
  // Starts the member's process (its files already written).
  Status Launch(Member& m);
  // Why the member cannot come up: it has exited, or lost a port (then sets `*port_taken`).
  std::optional<std::string> Failed(Member& m, bool* port_taken);
  // kUnavailable with `what` and every member's log tail; kills the members.
  Status FailWithLogs(const std::string& what);
  // Its `srvr` reply ("" when it does not answer); Ready when that says it serves.
  std::string Srvr(int member) const;
  bool Ready(int member) const;
  void StopAll();
  bool Running(int member) const {
    return members_[member].process.pid() > 0 && !members_[member].paused;
  }

  ZookeeperOptions options_;
  std::string made_dir_;  // removed by the destructor
  std::vector<Member> members_;
};

}  // namespace fencekit::procutil
