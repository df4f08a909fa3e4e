#include "fencekit/procutil/zookeeper_ensemble.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "exchange.h"
#include "fencekit/procutil/loopback.h"
#include "fencekit/procutil/proc_stat.h"

namespace fencekit::procutil {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// Debian's zookeeper.jar names its other jars in its manifest's Class-Path, but no binding for
// slf4j: without these two, slf4j falls back to no logging at all.
constexpr const char* kClasspath =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar";
constexpr const char* kZookeeperJar = "/usr/share/java/zookeeper.jar";

// Everything to stdout, which the member's log file receives.
constexpr std::string_view kLog4jProperties =
    "log4j.rootLogger=INFO, CONSOLE\n"
    "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n\n"
    // One INFO line per `srvr` this class sends: they would crowd out the log tails quoted on
    // failure.
    "log4j.logger.org.apache.zookeeper.server.NIOServerCnxn=WARN\n";

// Bounds every query: a paused member accepts connections but never answers.
constexpr std::chrono::milliseconds kSrvrTimeout = 1s;

// What a member logs when it cannot bind a port (Java's BindException). It may not exit: the
// leader binds its peer port only once elected, and a failure there sends it back to the
// election.
constexpr std::string_view kPortTaken = "Address already in use";

// Waits until `fd` has one of `events` (or an error) or `deadline` passes; false then.
bool WaitFd(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// ZooKeeper's four-letter words: connect to the client port, send the word, read the reply to
// the end of the connection. "" on refusal, error, or when `timeout` passes first (the whole
// exchange, not each step).
std::string FourLetterWord(std::uint16_t port, std::string_view word,
                           std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return "";
  sockaddr_in addr = LoopbackAddress(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (!ok && errno == EINPROGRESS && WaitFd(fd, POLLOUT, deadline)) {
    int error = 0;
    socklen_t len = sizeof error;
    ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
  }
  // Four bytes always fit in a fresh connection's send buffer.
  if (ok) ok = ::send(fd, word.data(), word.size(), MSG_NOSIGNAL) == std::ssize(word);
  std::string reply;
  char buf[4096];
  while (ok) {
    if (!WaitFd(fd, POLLIN, deadline)) {
      ok = false;
      break;
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;  // the whole reply
    if (n < 0) {
      ok = errno == EINTR || errno == EAGAIN;
      continue;
    }
    reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return ok ? reply : "";
}

// The value of the line "`name`: value" in a `srvr` reply; "" when absent.
std::string SrvrField(const std::string& reply, std::string_view name) {
  std::string key = std::string(name) + ": ";
  std::size_t at = reply.starts_with(key) ? 0 : reply.find("\n" + key);
  if (at == std::string::npos) return "";
  at += at == 0 ? key.size() : key.size() + 1;
  std::size_t end = reply.find('\n', at);
  return reply.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The epoch of the zxid a `srvr` reply gives (its high 32 bits): the leader's; -1 without one.
long long ZxidEpoch(const std::string& reply) {
  std::string zxid = SrvrField(reply, "Zxid");
  if (zxid.empty()) return -1;
  return static_cast<long long>(std::strtoull(zxid.c_str(), nullptr, 16) >> 32);
}

// The last 4 KiB of the log at `path`, of what follows `offset` (the runs before a restart
// stay in the log).
std::string LogSince(const std::string& path, std::uintmax_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (!in || size <= static_cast<std::streamoff>(offset)) return "";
  std::streamoff from = std::max<std::streamoff>(static_cast<std::streamoff>(offset), size - 4096);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.seekg(from);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

Status WriteTextFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::Unavailable("cannot write " + path);
  return Status::Ok();
}

}  // namespace

ZookeeperEnsemble::~ZookeeperEnsemble() {
  StopAll();
  if (!made_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(made_dir_, ec);
  }
}

Status ZookeeperEnsemble::Start(ZookeeperOptions options) {
  StopAll();
  options_ = std::move(options);
  if (options_.members < 1) return Status::InvalidArgument("a ZooKeeper ensemble needs a member");
  if (options_.tick_ms < 1) return Status::InvalidArgument("ZooKeeper's tick_ms must be >= 1");
  std::error_code ec;
  if (!std::filesystem::exists(kZookeeperJar, ec)) {
    return Status::Unavailable(std::string(kZookeeperJar) + " is missing (install zookeeper)");
  }
  if (options_.dir.empty()) {
    if (made_dir_.empty()) {
      const char* base = std::getenv("TMPDIR");
      std::string tmpl =
          std::string(base != nullptr && *base ? base : "/tmp") + "/fencekit-zookeeper-XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) {
        return Status::Unavailable("cannot create a folder for ZooKeeper under " + tmpl);
      }
      made_dir_ = tmpl;
    }
    options_.dir = made_dir_;
  }
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) {
    return Status::Unavailable("cannot create the ZooKeeper folder " + options_.dir + ": " +
                               ec.message());
  }
  if (Status s = WriteTextFile(options_.dir + "/log4j.properties", kLog4jProperties); !s.ok()) {
    return s;
  }
  // Ports can be taken between FreeLoopbackPort() and ZooKeeper's bind: retry with new ones.
  Status last = Status::Ok();
  for (int attempt = 0; attempt < 5; ++attempt) {
    members_.clear();
    members_.resize(options_.members);
    std::set<std::uint16_t> used;  // FreeLoopbackPort() may hand out a port twice
    auto fresh = [&](std::uint16_t* port) -> Status {
      do {
        auto p = FreeLoopbackPort();
        if (!p.ok()) return p.status();
        *port = *p;
      } while (!used.insert(*port).second);
      return Status::Ok();
    };
    for (int i = 0; i < options_.members; ++i) {
      Member& m = members_[i];
      m.name = "zk" + std::to_string(i);
      for (std::uint16_t* port : {&m.client_port, &m.peer_port, &m.election_port}) {
        if (Status s = fresh(port); !s.ok()) return s;
      }
      std::string base = options_.dir + "/" + m.name;
      m.config = base + ".cfg";
      m.data = base + ".data";
      m.log = base + ".log";
      std::filesystem::remove(m.log, ec);
    }
    bool port_taken = false;
    last = StartOnce(&port_taken);
    if (last.ok() || !port_taken) return last;
  }
  return last;
}

std::string ZookeeperEnsemble::connect_string(int first) const {
  std::string out;
  auto add = [&](int m) {
    out += (out.empty() ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(members_[m].client_port);
  };
  if (first >= 0) add(first);
  for (int m = 0; m < size(); ++m) {
    if (m != first) add(m);
  }
  return out;
}

Status ZookeeperEnsemble::StartOnce(bool* port_taken) {
  for (int i = 0; i < size(); ++i) {
    if (Status s = WriteConfig(members_[i]); !s.ok()) return s;
    if (Status s = ResetData(i); !s.ok()) return s;
  }
  return LaunchAllAndWait(port_taken);
}

Status ZookeeperEnsemble::ResetData(int member) const {
  const Member& m = members_[member];
  std::error_code ec;
  std::filesystem::remove_all(m.data, ec);
  std::filesystem::create_directories(m.data, ec);
  if (ec) return Status::Unavailable("cannot create " + m.data + ": " + ec.message());
  // The member's id in the ensemble, which its config's server.N lines refer to.
  return WriteTextFile(m.data + "/myid", std::to_string(member + 1) + "\n");
}

Status ZookeeperEnsemble::WriteConfig(const Member& m) const {
  int tick = options_.tick_ms;
  std::ostringstream cfg;
  // initLimit and syncLimit are in ticks: 3s for a follower to connect to a new leader and
  // sync (a cold JVM on a busy machine), 1s of silence before a leader and a follower give up
  // on each other (a paused member's peers elect without it after that).
  cfg << "tickTime=" << tick << "\n"
      << "initLimit=" << std::max(1, 3000 / tick) << "\n"
      << "syncLimit=" << std::max(1, 1000 / tick) << "\n"
      << "minSessionTimeout=" << 2 * tick << "\n"
      << "maxSessionTimeout=" << max_session_timeout().count() << "\n"
      << "dataDir=" << m.data << "\n"
      << "clientPort=" << m.client_port << "\n"
      << "clientPortAddress=127.0.0.1\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=srvr,ruok,mntr\n"
      // No fsync per commit: a SIGKILLed member loses nothing the kernel holds, and only a
      // power loss would lose more. Transaction log files grow 1 MiB at a time (64 by default).
      << "forceSync=no\n"
      << "preAllocSize=1024\n";
  if (size() > 1) {
    cfg << "standaloneEnabled=false\n";
    for (int i = 0; i < size(); ++i) {
      cfg << "server." << i + 1 << "=127.0.0.1:" << members_[i].peer_port << ":"
          << members_[i].election_port << "\n";
    }
  }
  return WriteTextFile(m.config, cfg.str());
}

Status ZookeeperEnsemble::LaunchAllAndWait(bool* port_taken) {
  // A JVM takes seconds to start on a busy machine: all at once, then wait for them together.
  for (Member& m : members_) {
    if (Status s = Launch(m); !s.ok()) {
      StopAll();
      return s;
    }
  }
  auto deadline = SteadyClock::now() + options_.start_timeout;
  while (SteadyClock::now() < deadline) {
    bool all = true;
    for (int i = 0; i < size(); ++i) {
      Member& m = members_[i];
      if (m.ready) continue;
      if (auto why = Failed(m, port_taken)) return FailWithLogs(m.name + " " + *why);
      m.ready = Ready(i);
      all = all && m.ready;
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(50ms);
  }
  return FailWithLogs("not every member served in time");
}

Status ZookeeperEnsemble::Launch(Member& m) {
  m.paused = false;
  m.ready = false;
  std::error_code ec;
  auto bytes = std::filesystem::file_size(m.log, ec);
  m.log_start = ec ? 0 : bytes;
  // clang-format off
  std::vector<std::string> argv = {
      options_.java,
      // Small and frugal: one GC thread set, the quick compiler only, no hsperfdata file.
      "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
      "-XX:+ExitOnOutOfMemoryError",
      "-Dzookeeper.admin.enableServer=false",
      "-Dlog4j.configuration=file:" + options_.dir + "/log4j.properties",
      "-cp", kClasspath,
      "org.apache.zookeeper.server.quorum.QuorumPeerMain", m.config};
  // clang-format on
  Status started = m.process.Start({.argv = std::move(argv), .output_path = m.log});
  if (!started.ok()) return Status::Unavailable(started.message() + " (install zookeeper)");
  return Status::Ok();
}

std::optional<std::string> ZookeeperEnsemble::Failed(Member& m, bool* port_taken) {
  bool exited = m.process.pid() > 0 && m.process.Exited();
  if (LogSince(m.log, m.log_start).find(kPortTaken) != std::string::npos) {
    *port_taken = true;
    return "lost a port to another process";
  }
  if (exited) return "exited";
  return std::nullopt;
}

Status ZookeeperEnsemble::FailWithLogs(const std::string& what) {
  std::stringstream logs;
  for (const Member& m : members_) {
    logs << m.name << (m.ready ? " (ready)" : " (not ready)") << ", client port " << m.client_port
         << ", log " << m.log << ":\n"
         << m.process.OutputTail();
  }
  StopAll();
  return Status::Unavailable("ZooKeeper (" + std::to_string(size()) + " members): " + what +
                             " (start timeout " + std::to_string(options_.start_timeout.count()) +
                             "ms).\n" + logs.str());
}

std::string ZookeeperEnsemble::Srvr(int member) const {
  return FourLetterWord(members_[member].client_port, "srvr", kSrvrTimeout);
}

bool ZookeeperEnsemble::Ready(int member) const {
  std::string mode = SrvrField(Srvr(member), "Mode");
  return size() == 1 ? mode == "standalone" : mode == "leader" || mode == "follower";
}

void ZookeeperEnsemble::StopAll() {
  for (Member& m : members_) {
    m.process.Kill();
    m.paused = false;
    m.ready = false;
  }
}

int ZookeeperEnsemble::Leader() {
  auto deadline = SteadyClock::now() + 10s;
  while (SteadyClock::now() < deadline) {
    int leader = -1;
    long long leader_epoch = -1;
    for (int i = 0; i < size(); ++i) {
      if (!Running(i)) continue;
      std::string reply = Srvr(i);
      std::string mode = SrvrField(reply, "Mode");
      if (mode != "leader" && mode != "standalone") continue;
      // A resumed old leader may still say leader for a moment, in an older epoch.
      if (long long epoch = ZxidEpoch(reply); epoch > leader_epoch) {
        leader = i;
        leader_epoch = epoch;
      }
    }
    if (leader >= 0) return leader;
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

void ZookeeperEnsemble::Kill(int member) {
  members_[member].process.Kill();
  members_[member].paused = false;
  members_[member].ready = false;
}

Status ZookeeperEnsemble::Restart(int member) {
  if (member < 0 || member >= size()) {
    return Status::InvalidArgument("no ZooKeeper member " + std::to_string(member) +
                                   " to restart (" + std::to_string(size()) + " members)");
  }
  Member& m = members_[member];
  m.process.Kill();
  if (Status s = Launch(m); !s.ok()) return s;
  auto deadline = SteadyClock::now() + options_.start_timeout;
  std::string why = "did not serve within " + std::to_string(options_.start_timeout.count()) +
                    "ms of its restart (a quorum of members must be running)";
  bool port_taken = false;
  while (SteadyClock::now() < deadline) {
    if (auto failed = Failed(m, &port_taken)) {
      why = *failed + " after its restart";
      break;
    }
    if (Ready(member)) {
      m.ready = true;
      return Status::Ok();
    }
    std::this_thread::sleep_for(50ms);
  }
  std::string log = m.process.OutputTail();
  m.process.Kill();
  return Status::Unavailable("ZooKeeper member " + m.name + " (client port " +
                             std::to_string(m.client_port) + ") " + why + ". Its log (" + m.log +
                             "):\n" + log);
}

void ZookeeperEnsemble::Pause(int member) {
  Member& m = members_[member];
  if (m.process.pid() > 0) {
    m.process.Signal(SIGSTOP);
    // Stopped once every thread is: before that, a request sent now may still be answered.
    (void)WaitUntilStopped(m.process.pid());
    m.paused = true;
  }
}

void ZookeeperEnsemble::Resume(int member) {
  members_[member].process.Signal(SIGCONT);
  members_[member].paused = false;
}

Status ZookeeperEnsemble::Wipe() {
  if (members_.empty()) return Status::InvalidArgument("Wipe() before Start()");
  StopAll();
  for (int i = 0; i < size(); ++i) {
    if (Status s = ResetData(i); !s.ok()) return s;
  }
  bool port_taken = false;  // the ports are the ensemble's: no other ones to try
  return LaunchAllAndWait(&port_taken);
}

}  // namespace fencekit::procutil
