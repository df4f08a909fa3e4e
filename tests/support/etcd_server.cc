#include "support/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/redis_server.h"  // FreePort

namespace fencekit::testing {
namespace {

using namespace std::chrono_literals;

std::string Base64(const std::string& in) {
  using namespace boost::archive::iterators;
  using It = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string out(It(in.begin()), It(in.end()));
  out.append((3 - in.size() % 3) % 3, '=');
  return out;
}

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
    std::vector<std::string> args = {
        "etcd", "--name", m.name, "--data-dir", data,
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial, "--initial-cluster-state", "new",
        "--initial-cluster-token", token,
        "--heartbeat-interval", "10", "--election-timeout", "100",
        // 3.4 accepts --log-level with its default logger (capnslog) but ignores it: only zap
        // honours it. Explicit stderr keeps zap off journald under systemd.
        "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"};
    // clang-format on
    // Everything the child needs is made before fork(): it may only make async-signal-safe
    // calls, as other threads of the test may hold the allocator's lock.
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fd = open(m.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    m.pid = fork();
    if (m.pid == 0) {
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execvp("etcd", argv.data());
      _exit(127);
    }
    if (fd >= 0) close(fd);
    if (m.pid < 0) {
      StopAll();
      ADD_FAILURE() << "fork failed: " << strerror(errno);
      return true;
    }
  }
  // Ready when every member answers and knows a leader: an event, polled with a bound.
  std::vector<bool> ready(members_.size(), false);
  auto deadline = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (Member& m : members_) {
      int status = 0;
      if (m.pid > 0 && waitpid(m.pid, &status, WNOHANG) == m.pid) {
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
    bool all = true;
    for (int i = 0; i < size(); ++i) {
      if (!ready[i]) ready[i] = Ready(i);
      all = all && ready[i];
    }
    if (all) return true;
    std::this_thread::sleep_for(10ms);
  }
  std::stringstream logs;
  for (int i = 0; i < size(); ++i) {
    logs << members_[i].name << (ready[i] ? " (ready)" : " (not ready)") << ", port "
         << members_[i].client_port << ", log:\n"
         << Tail(members_[i].log);
  }
  ADD_FAILURE() << "etcd (" << size() << " members) was not ready with a leader within 15s.\n"
                << logs.str();
  StopAll();
  return true;
}

bool EtcdCluster::Ready(int member) const {
  std::string leader = Field(Post(member, "/v3/maintenance/status", "{}"), "leader");
  if (leader.empty() || leader == "0") return false;
  std::string peer = "\"http://127.0.0.1:" + std::to_string(members_[member].peer_port) + "\"";
  return Post(member, "/v3/cluster/member/list", "{}").find(peer) != std::string::npos;
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
      std::string status = Post(i, "/v3/maintenance/status", "{}");
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
    std::string reply = Post(i, "/v3/kv/deleterange", "{\"key\":\"" + Base64(key) + "\"}");
    if (reply.find("\"header\"") == std::string::npos) continue;
    return std::strtoll(Field(reply, "deleted").c_str(), nullptr, 10);  // absent: 0
  }
  return -1;
}

std::string EtcdCluster::Post(int member, const std::string& target,
                              const std::string& body) const {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(members_[member].client_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Bounds connect, send and each recv: a paused member accepts but never answers.
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  std::string request = "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        "Content-Type: application/json\r\nConnection: close\r\n" +
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string reply;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  if (!reply.starts_with("HTTP/1.1 200")) return "";
  auto at = reply.find("\r\n\r\n");
  return at == std::string::npos ? "" : reply.substr(at + 4);
}

}  // namespace fencekit::testing
