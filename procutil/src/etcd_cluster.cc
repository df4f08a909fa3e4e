#include "fencekit/procutil/etcd_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "exchange.h"
#include "fencekit/common/text.h"
#include "fencekit/procutil/loopback.h"
#include "fencekit/procutil/proc_stat.h"

namespace fencekit::procutil {
namespace {

using namespace std::chrono_literals;

// Bounds every call: a paused member accepts but never answers.
constexpr std::chrono::milliseconds kCallTimeout = 1s;

// The value of a JSON field `"name":"..."` in `body` (etcd sends int64s as strings); "" when
// absent, which is also how the gateway sends zero.
std::string Field(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\"" + name + "\":\"?([^\",}]*)"))) return "";
  return m[1];
}

}  // namespace

EtcdCluster::~EtcdCluster() {
  StopAll();
  if (!made_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(made_dir_, ec);
  }
}

Status EtcdCluster::Start(EtcdOptions options) {
  StopAll();
  options_ = std::move(options);
  if (options_.members < 1) return Status::InvalidArgument("an etcd cluster needs a member");
  if (options_.dir.empty()) {
    if (made_dir_.empty()) {
      const char* base = std::getenv("TMPDIR");
      std::string tmpl =
          std::string(base != nullptr && *base ? base : "/tmp") + "/fencekit-etcd-XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr) {
        return Status::Unavailable("cannot create a folder for etcd under " + tmpl);
      }
      made_dir_ = tmpl;
    }
    options_.dir = made_dir_;
  }
  std::error_code made;
  std::filesystem::create_directories(options_.dir, made);
  if (made) {
    return Status::Unavailable("cannot create the etcd folder " + options_.dir + ": " +
                               made.message());
  }
  // Ports can be taken between FreeLoopbackPort() and etcd's bind: retry with new ones.
  Status last = Status::Ok();
  for (int attempt = 0; attempt < 5; ++attempt) {
    members_.clear();
    members_.resize(options_.members);
    for (int i = 0; i < options_.members; ++i) {
      Member& m = members_[i];
      m.name = "m" + std::to_string(i);
      auto client = FreeLoopbackPort();
      auto peer = FreeLoopbackPort();
      auto admin = Tls() ? FreeLoopbackPort() : client;
      if (!client.ok()) return client.status();
      if (!peer.ok()) return peer.status();
      if (!admin.ok()) return admin.status();
      m.client_port = *client;
      m.peer_port = *peer;
      m.admin_port = *admin;
      m.log = options_.dir + "/" + m.name + ".log";
      std::error_code ec;
      std::filesystem::remove(m.log, ec);
    }
    bool port_taken = false;
    last = StartOnce(&port_taken);
    if (last.ok() || !port_taken) return last;
  }
  return last;
}

std::string EtcdCluster::uri(int first) const {
  std::string out = Tls() ? "etcds://" : "etcd://";
  auto add = [&](int m) {
    out += (out.back() == '/' ? "127.0.0.1:" : ",127.0.0.1:") +
           std::to_string(members_[m].client_port);
  };
  if (first >= 0) add(first);
  for (int m = 0; m < size(); ++m) {
    if (m != first) add(m);
  }
  return out;
}

std::string EtcdCluster::member_uri(int member) const {
  return (Tls() ? "etcds://127.0.0.1:" : "etcd://127.0.0.1:") +
         std::to_string(members_[member].client_port);
}

Status EtcdCluster::StartOnce(bool* port_taken) {
  initial_cluster_.clear();
  for (const Member& m : members_) {
    initial_cluster_ += (initial_cluster_.empty() ? "" : ",") + m.name +
                        "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  // Unique per cluster, so a member can never join another cluster.
  cluster_token_ =
      "fencekit-" + std::to_string(::getpid()) + "-" + std::to_string(members_[0].client_port);
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  // Before joining a new cluster, a 3.4 member asks each peer whether it is already a member;
  // a peer that listens but does not serve yet holds that question for a fixed 1s, one not
  // listening yet refuses at once. Started together, 3 members take 0.2s to 2.2s depending on
  // that race; started one by one, each once the previous one serves its peers, 0.2s.
  for (Member& m : members_) {
    // A data folder left by a failed attempt holds the old membership, and etcd would then
    // ignore --initial-cluster: start from nothing.
    std::error_code ec;
    std::filesystem::remove_all(options_.dir + "/" + m.name + ".data", ec);
    if (Status started = Launch(m); !started.ok()) {
      StopAll();
      return started;
    }
    while (HttpCall(m.peer_port, "GET", "/members", "", kCallTimeout).empty()) {
      if (auto done = ReapEarlyExit(port_taken)) return *done;
      if (std::chrono::steady_clock::now() > deadline) {
        return FailWithLogs(m.name + " did not serve its peers in time");
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  // Ready when every member answers and knows a leader: an event, polled with a bound.
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto done = ReapEarlyExit(port_taken)) return *done;
    bool all = true;
    for (int i = 0; i < size(); ++i) {
      if (!members_[i].ready) members_[i].ready = Ready(i);
      all = all && members_[i].ready;
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(10ms);
  }
  return FailWithLogs("the cluster had no leader in time");
}

Status EtcdCluster::Launch(Member& m) {
  std::string client =
      (Tls() ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(m.client_port);
  std::string listen = client;
  if (Tls()) listen += ",http://127.0.0.1:" + std::to_string(m.admin_port);
  std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::string data = options_.dir + "/" + m.name + ".data";
  m.paused = false;
  m.ready = false;
  // With a data folder from an earlier start, etcd ignores the --initial-cluster flags and
  // rejoins with the membership on disk. Each flag beside its value.
  std::vector<std::string> extra;
  if (Tls()) {
    extra = {"--cert-file", options_.tls_cert_file, "--key-file", options_.tls_key_file};
    if (!options_.client_ca_file.empty()) {
      extra.insert(extra.end(),
                   {"--trusted-ca-file", options_.client_ca_file, "--client-cert-auth"});
    }
  }
  if (options_.auth_token_ttl.count() > 0) {
    extra.insert(extra.end(),
                 {"--auth-token-ttl", std::to_string(options_.auth_token_ttl.count())});
  }
  // clang-format off
  std::vector<std::string> argv = {
      options_.binary, "--name", m.name, "--data-dir", data,
      "--listen-client-urls", listen, "--advertise-client-urls", client,
      "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
      "--initial-cluster", initial_cluster_, "--initial-cluster-state", "new",
      "--initial-cluster-token", cluster_token_,
      "--heartbeat-interval", "10", "--election-timeout", "100",
      // 3.4 accepts --log-level with its default logger (capnslog) but ignores it: only zap
      // honours it. Explicit stderr keeps zap off journald under systemd.
      "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"};
  // clang-format on
  argv.insert(argv.end(), extra.begin(), extra.end());
  Status started = m.process.Start({.argv = std::move(argv), .output_path = m.log});
  if (!started.ok()) return Status::Unavailable(started.message() + " (install etcd-server)");
  return Status::Ok();
}

Status EtcdCluster::Restart(int member) {
  if (member < 0 || member >= size()) {
    return Status::InvalidArgument("no etcd member " + std::to_string(member) + " to restart (" +
                                   std::to_string(size()) + " members)");
  }
  Member& m = members_[member];
  m.process.Kill();
  if (Status s = Launch(m); !s.ok()) return s;
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  std::string why = "did not answer with a leader within " +
                    std::to_string(options_.start_timeout.count()) + "ms of its restart";
  while (std::chrono::steady_clock::now() < deadline) {
    if (m.process.Exited()) {
      why = "exited after its restart (its ports may have been taken while it was down)";
      break;
    }
    if (Ready(member)) {
      m.ready = true;
      return Status::Ok();
    }
    std::this_thread::sleep_for(10ms);
  }
  std::string log = m.process.OutputTail();
  m.process.Kill();
  return Status::Unavailable("etcd member " + m.name + " (client port " +
                             std::to_string(m.client_port) + ") " + why + ". Its log:\n" + log);
}

std::optional<Status> EtcdCluster::ReapEarlyExit(bool* port_taken) {
  for (Member& m : members_) {
    if (m.process.pid() > 0 && m.process.Exited()) {
      std::string log = m.process.OutputTail();
      StopAll();
      *port_taken = log.find("address already in use") != std::string::npos;
      return Status::Unavailable("etcd member " + m.name + " exited at start. Its log:\n" + log);
    }
  }
  return std::nullopt;
}

Status EtcdCluster::FailWithLogs(const std::string& what) {
  std::stringstream logs;
  for (const Member& m : members_) {
    logs << m.name << (m.ready ? " (ready)" : " (not ready)") << ", client port " << m.client_port
         << ", log:\n"
         << m.process.OutputTail();
  }
  StopAll();
  return Status::Unavailable("etcd (" + std::to_string(size()) + " members): " + what + " (" +
                             std::to_string(options_.start_timeout.count()) + "ms).\n" +
                             logs.str());
}

bool EtcdCluster::Ready(int member) const {
  std::uint16_t port = members_[member].admin_port;
  std::string leader =
      Field(HttpCall(port, "POST", "/v3/maintenance/status", "{}", kCallTimeout), "leader");
  if (leader.empty() || leader == "0") return false;
  std::string peer = "\"http://127.0.0.1:" + std::to_string(members_[member].peer_port) + "\"";
  return HttpCall(port, "POST", "/v3/cluster/member/list", "{}", kCallTimeout).find(peer) !=
         std::string::npos;
}

void EtcdCluster::StopAll() {
  for (Member& m : members_) {
    m.process.Kill();
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
      std::string status =
          HttpCall(members_[i].admin_port, "POST", "/v3/maintenance/status", "{}", kCallTimeout);
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
  members_[member].process.Kill();
  members_[member].paused = false;
}

void EtcdCluster::Pause(int member) {
  Member& m = members_[member];
  if (m.process.pid() > 0) {
    m.process.Signal(SIGSTOP);
    // Stopped once every thread is: before that, a request sent now may still be answered.
    (void)WaitUntilStopped(m.process.pid());
    m.paused = true;
  }
}

void EtcdCluster::Resume(int member) {
  members_[member].process.Signal(SIGCONT);
  members_[member].paused = false;
}

long long EtcdCluster::DeleteKey(const std::string& key) {
  std::string reply = AdminCall("/v3/kv/deleterange", "{\"key\":\"" + Base64Encode(key) + "\"}");
  if (reply.find("\"header\"") == std::string::npos) return -1;
  return std::strtoll(Field(reply, "deleted").c_str(), nullptr, 10);  // absent: 0
}

long long EtcdCluster::CountKeys(const std::string& prefix) {
  std::string end = prefix;
  if (end.empty()) return -1;
  end.back() = static_cast<char>(end.back() + 1);
  std::string reply =
      AdminCall("/v3/kv/range", "{\"key\":\"" + Base64Encode(prefix) + "\",\"range_end\":\"" +
                                    Base64Encode(end) + "\",\"count_only\":true}");
  if (reply.find("\"header\"") == std::string::npos) return -1;
  return std::strtoll(Field(reply, "count").c_str(), nullptr, 10);  // absent: 0
}

std::string EtcdCluster::AdminCall(std::string_view target, const std::string& body) {
  for (int i = 0; i < size(); ++i) {
    if (!Running(i)) continue;
    std::uint16_t port = members_[i].admin_port;
    std::string token;
    if (!root_password_.empty()) {
      token = Field(
          HttpCall(port, "POST", "/v3/auth/authenticate",
                   "{\"name\":\"root\",\"password\":\"" + root_password_ + "\"}", kCallTimeout),
          "token");
      if (token.empty()) continue;
    }
    std::string reply = HttpCall(port, "POST", target, body, kCallTimeout, token);
    if (!reply.empty()) return reply;
  }
  return "";
}

Status EtcdCluster::EnableAuth(const std::string& root_password,
                               const std::vector<EtcdUser>& users) {
  auto plain = [](const std::string& text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
  };
  if (!plain(root_password)) {
    return Status::InvalidArgument("the etcd root password must be A-Z a-z 0-9 . _ - only");
  }
  for (const EtcdUser& u : users) {
    if (!plain(u.name) || !plain(u.password) || u.name == "root") {
      return Status::InvalidArgument("etcd user \"" + u.name +
                                     "\": name and password must be A-Z a-z 0-9 . _ - only, "
                                     "and the name not root");
    }
  }
  std::vector<std::pair<std::string, std::string>> calls = {
      {"/v3/auth/user/add", "{\"name\":\"root\",\"password\":\"" + root_password + "\"}"},
      {"/v3/auth/role/add", "{\"name\":\"root\"}"},
      {"/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}"}};
  for (const EtcdUser& u : users) {
    calls.push_back(
        {"/v3/auth/user/add", "{\"name\":\"" + u.name + "\",\"password\":\"" + u.password + "\"}"});
    if (u.readwrite_prefix.empty()) continue;
    std::string end = u.readwrite_prefix;
    end.back() = static_cast<char>(end.back() + 1);
    calls.push_back({"/v3/auth/role/add", "{\"name\":\"" + u.name + "\"}"});
    calls.push_back(
        {"/v3/auth/role/grant", "{\"name\":\"" + u.name +
                                    "\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"" +
                                    Base64Encode(u.readwrite_prefix) + "\",\"range_end\":\"" +
                                    Base64Encode(end) + "\"}}"});
    calls.push_back(
        {"/v3/auth/user/grant", "{\"user\":\"" + u.name + "\",\"role\":\"" + u.name + "\"}"});
  }
  calls.push_back({"/v3/auth/enable", "{}"});
  for (const auto& [target, body] : calls) {
    if (AdminCall(target, body).find("\"header\"") == std::string::npos) {
      return Status::Unavailable("etcd refused " + target + " while enabling authentication");
    }
  }
  root_password_ = root_password;
  return Status::Ok();
}

}  // namespace fencekit::procutil
