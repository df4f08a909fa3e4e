// A redis-server process on a free loopback port, without persistence unless asked for.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::procutil {

struct RedisOptions {
  // 0: a free port; if another process takes it before redis-server binds it, Start() tries
  // again with another (a few times).
  std::uint16_t port = 0;
  // Where its output is appended. Empty: this process's stdout and stderr.
  std::string log_path;
  std::string binary = "redis-server";
  // Passed after the defaults, so a flag here wins: e.g. {"--appendonly", "yes",
  // "--appendfsync", "always", "--dir", folder} for a server whose data survives Restart().
  std::vector<std::string> extra_args;
  std::chrono::milliseconds start_timeout{20'000};
};

// redis-server on 127.0.0.1 with no RDB and no AOF (unless extra_args turn them on): a restart
// then loses every key. Ready when it answers INFO with its own process id, so a server of
// someone else's on the port never passes for it. Thread safety: not safe for concurrent use.
class RedisServer {
 public:
  // Starts it and waits until ready. kUnavailable, quoting its output, if it cannot start.
  Status Start(RedisOptions options = {});
  // SIGKILL, then starts it again on the same port, with the same options: empty unless
  // extra_args made its data persistent.
  Status Restart();

  std::uint16_t port() const { return port_; }
  // "redis://127.0.0.1:<port>"
  std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  ChildProcess& process() { return process_; }
  const ChildProcess& process() const { return process_; }

  // SIGKILL, then reaps it; the port stays known for Restart().
  void Stop() { process_.Kill(); }
  // SIGSTOP / SIGCONT: it hangs with its socket accepting, as a paused process would.
  void Pause();
  void Resume();

  // Runs one command (e.g. {"REPLICAOF", "NO", "ONE"}) on a new connection, within `timeout`
  // for the connection and for the reply: a string or status reply's text, an integer reply in
  // decimal, "" for nil. kUnavailable when it does not answer; kInternal, quoting it, for an
  // error reply or another type.
  Result<std::string> Command(const std::vector<std::string>& args,
                              std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;

 private:
  // One attempt on port_: false in `*port_taken` unless it exited because the port was taken.
  Status StartOn(bool* port_taken);

  RedisOptions options_;
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

}  // namespace fencekit::procutil
