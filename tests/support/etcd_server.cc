#include "support/etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <chrono>
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

// The value of a JSON string field `"name":"..."` in `body` (etcd sends int64s as strings).
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
    if (Start(attempt == 4)) return;
  }
}

EtcdCluster::~EtcdCluster() { StopAll(); }

std::string EtcdCluster::uri() const {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < members_.size(); ++i) {
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(members_[i].client_port);
  }
  return out;
}

bool EtcdCluster::Start(bool last_attempt) {
  std::string initial;
  for (const Member& m : members_) {
    initial +=
        (initial.empty() ? "" : ",") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  std::string token =
      "fencekit-test-" + std::to_string(getpid()) + "-" + std::to_string(members_[0].client_port);
  for (Member& m : members_) {
    std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
    std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::string data = dir_.File(m.name + ".data");
    std::vector<std::string> args = {"etcd",  "--name",
                                     m.name,  "--data-dir",
                                     data,    "--listen-client-urls",
                                     client,  "--advertise-client-urls",
                                     client,  "--listen-peer-urls",
                                     peer,    "--initial-advertise-peer-urls",
                                     peer,    "--initial-cluster",
                                     initial, "--initial-cluster-state",
                                     "new",   "--initial-cluster-token",
                                     token,   "--heartbeat-interval",
                                     "10",    "--election-timeout",
                                     "100"};
    m.pid = fork();
    if (m.pid == 0) {
      int fd = open(m.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("etcd", argv.data());
      _exit(127);
    }
  }
  // Ready when every member answers and one is leader: an event, polled with a bound.
  auto deadline = std::chrono::steady_clock::now() + 20s;
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
    for (int i = 0; i < size() && all; ++i) {
      std::string status = Post(i, "/v3/maintenance/status", "{}");
      all = !Field(status, "leader").empty() && Field(status, "leader") != "0";
    }
    if (all) return true;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "etcd (" << size() << " members) did not elect a leader within 20s; "
                << members_[0].name << "'s log:\n"
                << Tail(members_[0].log);
  StopAll();
  return true;
}

void EtcdCluster::StopAll() {
  for (Member& m : members_) {
    if (m.pid > 0) {
      kill(m.pid, SIGCONT);
      kill(m.pid, SIGKILL);
      waitpid(m.pid, nullptr, 0);
      m.pid = -1;
    }
  }
}

int EtcdCluster::Leader() {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> ids(members_.size());
    std::string leader;
    for (int i = 0; i < size(); ++i) {
      if (members_[i].pid <= 0) continue;
      std::string status = Post(i, "/v3/maintenance/status", "{}");
      ids[i] = Field(status, "member_id");
      std::string l = Field(status, "leader");
      if (!l.empty() && l != "0") leader = l;
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
}

void EtcdCluster::Pause(int member) {
  if (members_[member].pid > 0) kill(members_[member].pid, SIGSTOP);
}

void EtcdCluster::Resume(int member) {
  if (members_[member].pid > 0) kill(members_[member].pid, SIGCONT);
}

long long EtcdCluster::DeleteKey(const std::string& key) {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].pid <= 0) continue;
    std::string reply = Post(i, "/v3/kv/deleterange", "{\"key\":\"" + Base64(key) + "\"}");
    if (reply.find("\"header\"") == std::string::npos) continue;
    std::string deleted = Field(reply, "deleted");
    return deleted.empty() ? 0 : std::stoll(deleted);
  }
  return -1;
}

std::string EtcdCluster::Post(int member, const std::string& target,
                              const std::string& body) const {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(members_[member].client_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
