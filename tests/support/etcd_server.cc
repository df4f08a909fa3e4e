#include "support/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "fencekit/common/text.h"
#include "support/redis_server.h"  // FreePort

namespace fencekit::testing {
namespace {

using namespace std::chrono_literals;

// The value of a JSON field `"name":"..."` in `body` (etcd sends int64s as strings); "" when
// absent, which is also how the gateway sends zero.
std::string Field(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\"" + name + "\":\"?([^\",}]*)"))) return "";
  return m[1];
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.empty()) return "(empty)\n";
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

// Starts `args` with stdout and stderr to `log`; the child's pid, or -1.
pid_t Spawn(std::vector<std::string> args, const std::string& log) {
  // Everything the child needs is made before fork(): it may only make async-signal-safe
  // calls, as another thread of the test may hold the allocator's lock.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid == 0) {
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(argv[0], argv.data());
    const char kMessage[] = "cannot run it: not found on PATH, or not executable\n";
    ssize_t ignored = write(2, kMessage, sizeof kMessage - 1);
    (void)ignored;
    _exit(127);
  }
  if (fd >= 0) close(fd);
  return pid;
}

// One HTTP/1.1 request to 127.0.0.1:port (a JSON body when not empty); the reply body, or ""
// on any error or a status other than 200.
std::string Call(std::uint16_t port, const std::string& method, const std::string& target,
                 const std::string& body) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Bounds connect, send and each recv: a paused member accepts but never answers.
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        (body.empty() ? "" : "Content-Type: application/json\r\n") +
                        "Connection: close\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\n\r\n" + body;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  // Read until the body is complete: the peer port answers "Connection: close" but leaves the
  // connection open, so waiting for EOF would cost the whole timeout.
  std::string reply;
  std::size_t head_end = std::string::npos, length = std::string::npos;
  char buf[4096];
  while (head_end == std::string::npos || length == std::string::npos ||
         reply.size() < head_end + 4 + length) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
    if (head_end != std::string::npos) continue;
    head_end = reply.find("\r\n\r\n");
    std::smatch m;
    std::string head = reply.substr(0, head_end);
    if (head_end != std::string::npos &&
        std::regex_search(head, m,
                          std::regex("\r\ncontent-length: *([0-9]+)", std::regex::icase))) {
      length = std::stoul(m[1]);
    }
  }
  close(fd);
  if (!reply.starts_with("HTTP/1.1 200") || head_end == std::string::npos) return "";
  std::string body_in = reply.substr(head_end + 4);
  return length != std::string::npos && body_in.size() < length ? "" : body_in;
}

}  // namespace

EtcdCluster::EtcdCluster(int members) {
  // Ports can be taken between FreePort() and etcd's bind: retry with new ones.
  for (int attempt = 0; attempt < 5; ++attempt) {
    members_.assign(members, {});
    for (int i = 0; i < members; ++i) {
      members_[i].name = "m" + std::to_string(i);
      members_[i].client_port = FreePort();
      members_[i].peer_port = FreePort();
      members_[i].log = dir_.File(members_[i].name + ".log");
    }
    if (Start(/*last_attempt=*/attempt == 4)) return;
  }
}

EtcdCluster::~EtcdCluster() { StopAll(); }  // dir_ then removes the data folders

std::string EtcdCluster::uri() const {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < members_.size(); ++i) {
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(members_[i].client_port);
  }
  return out;
}

std::string EtcdCluster::member_uri(int member) const {
  return "etcd://127.0.0.1:" + std::to_string(members_[member].client_port);
}

bool EtcdCluster::Start(bool last_attempt) {
  std::string initial;
  for (const Member& m : members_) {
    initial +=
        (initial.empty() ? "" : ",") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  // Unique per cluster, so a member can never join another test's cluster.
  std::string token =
      "fencekit-test-" + std::to_string(getpid()) + "-" + std::to_string(members_[0].client_port);
  auto deadline = std::chrono::steady_clock::now() + 15s;
  // Before joining a new cluster, a 3.4 member asks each peer whether it is already a member;
  // a peer that listens but does not serve yet holds that question for a fixed 1s, one not
  // listening yet refuses at once. Started together, 3 members take 0.2s to 2.2s depending on
  // that race; started one by one, each once the previous one serves its peers, 0.2s.
  for (Member& m : members_) {
    std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
    std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::string data = dir_.File(m.name + ".data");
    // A data folder left by a failed attempt holds the old membership, and etcd would then
    // ignore --initial-cluster: start from nothing.
    std::error_code ec;
    std::filesystem::remove_all(data, ec);
    // Each flag beside its value.
    // clang-format off
    m.pid = Spawn({
        "etcd", "--name", m.name, "--data-dir", data,
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial, "--initial-cluster-state", "new",
        "--initial-cluster-token", token,
        "--heartbeat-interval", "10", "--election-timeout", "100",
        // 3.4 accepts --log-level with its default logger (capnslog) but ignores it: only zap
        // honours it. Explicit stderr keeps zap off journald under systemd.
        "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"}, m.log);
    // clang-format on
    if (m.pid < 0) {
      StopAll();
      ADD_FAILURE() << "fork failed: " << strerror(errno);
      return true;
    }
    while (Call(m.peer_port, "GET", "/members", "").empty()) {
      if (auto done = ReapEarlyExit(last_attempt)) return *done;
      if (std::chrono::steady_clock::now() > deadline) {
        return FailWithLogs(m.name + " did not serve its peers within 15s");
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  // Ready when every member answers and knows a leader: an event, polled with a bound.
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto done = ReapEarlyExit(last_attempt)) return *done;
    bool all = true;
    for (int i = 0; i < size(); ++i) {
      if (!members_[i].ready) members_[i].ready = Ready(i);
      all = all && members_[i].ready;
    }
    if (all) return true;
    std::this_thread::sleep_for(10ms);
  }
  return FailWithLogs("the cluster was not ready with a leader within 15s");
}

std::optional<bool> EtcdCluster::ReapEarlyExit(bool last_attempt) {
  for (Member& m : members_) {
    if (m.pid > 0 && waitpid(m.pid, nullptr, WNOHANG) == m.pid) {
      m.pid = -1;
      std::string log = Tail(m.log);
      StopAll();
      if (!last_attempt && log.find("address already in use") != std::string::npos) {
        return false;
      }
      ADD_FAILURE() << "etcd member " << m.name << " exited at start (is etcd-server "
                    << "installed? scripts/test installs it). Its log:\n"
                    << log;
      return true;
    }
  }
  return std::nullopt;
}

bool EtcdCluster::FailWithLogs(const std::string& what) {
  std::stringstream logs;
  for (const Member& m : members_) {
    logs << m.name << (m.ready ? " (ready)" : " (not ready)") << ", client port " << m.client_port
         << ", log:\n"
         << Tail(m.log);
  }
  ADD_FAILURE() << "etcd (" << size() << " members): " << what << ".\n" << logs.str();
  StopAll();
  return true;
}

bool EtcdCluster::Ready(int member) const {
  std::uint16_t port = members_[member].client_port;
  std::string leader = Field(Call(port, "POST", "/v3/maintenance/status", "{}"), "leader");
  if (leader.empty() || leader == "0") return false;
  std::string peer = "\"http://127.0.0.1:" + std::to_string(members_[member].peer_port) + "\"";
  return Call(port, "POST", "/v3/cluster/member/list", "{}").find(peer) != std::string::npos;
}

void EtcdCluster::StopAll() {
  for (Member& m : members_) {
    if (m.pid > 0) {
      kill(m.pid, SIGKILL);
      waitpid(m.pid, nullptr, 0);
      m.pid = -1;
    }
    m.paused = false;
  }
}

int EtcdCluster::Leader() {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> ids(members_.size());
    std::string leader;
    long long leader_term = -1;
    for (int i = 0; i < size(); ++i) {
      if (!Running(i)) continue;
      std::string status = Call(members_[i].client_port, "POST", "/v3/maintenance/status", "{}");
      ids[i] = Field(status, "member_id");
      std::string l = Field(status, "leader");
      // A resumed old leader may still name itself for a moment, in an older term.
      long long term = std::strtoll(Field(status, "raftTerm").c_str(), nullptr, 10);
      if (!l.empty() && l != "0" && term > leader_term) {
        leader = l;
        leader_term = term;
      }
    }
    for (int i = 0; i < size(); ++i) {
      if (!leader.empty() && ids[i] == leader) return i;
    }
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

void EtcdCluster::Kill(int member) {
  Member& m = members_[member];
  if (m.pid > 0) {
    kill(m.pid, SIGKILL);
    waitpid(m.pid, nullptr, 0);
    m.pid = -1;
  }
  m.paused = false;
}

void EtcdCluster::Pause(int member) {
  Member& m = members_[member];
  if (m.pid > 0 && kill(m.pid, SIGSTOP) == 0) m.paused = true;
}

void EtcdCluster::Resume(int member) {
  Member& m = members_[member];
  if (m.pid > 0) kill(m.pid, SIGCONT);
  m.paused = false;
}

long long EtcdCluster::DeleteKey(const std::string& key) {
  for (int i = 0; i < size(); ++i) {
    if (!Running(i)) continue;
    std::string reply = Call(members_[i].client_port, "POST", "/v3/kv/deleterange",
                             "{\"key\":\"" + Base64Encode(key) + "\"}");
    if (reply.find("\"header\"") == std::string::npos) continue;
    return std::strtoll(Field(reply, "deleted").c_str(), nullptr, 10);  // absent: 0
  }
  return -1;
}

}  // namespace fencekit::testing
