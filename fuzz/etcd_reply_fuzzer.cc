// Fuzz target "etcd_reply": what etcd's JSON gateway answers, as EtcdProtocol (and the Gateway
// under it) interprets it. A scripted gateway on loopback answers each POST with the next reply
// of the input; the lock client's real Gateway sends the requests, and EtcdProtocol parses the
// replies into leases, places in a lock's line, holders and watch events.
//
// Input (text, so that seeds can be read and written by hand):
//   line 1: the operation (grant, keepalive, revoke, remaining, granted_ttl, enqueue, look,
//           read_key, release_key, why_gone, read_head, read_holder, move_key, exists,
//           watch_key, watch_line, events, all)
//   each further line: one reply, "<3-digit HTTP status> <body>" (status 000: close the
//           connection instead of answering); in a body, the byte 0x1e stands for a newline
//           (watch streams send one JSON object per line).
// Once the replies run out the gateway answers 404 {"code":5} (not found), which ends every
// call at once. A call answers a value or a Status, never crashes, and what it answers is
// usable: times fit steady_clock arithmetic, tokens come only from revisions >= 1.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "etcd/protocol.h"
#include "fencekit/common/mutex.h"
#include "support/fuzz_support.h"

namespace {

namespace etcd = fencekit::lockclient::etcd;
using std::chrono::milliseconds;

struct Reply {
  int status = 200;  // 0: close the connection
  std::string body;
};

// Most replies one input may script: each failed or "unavailable" reply costs the Gateway a
// retry, and retries past the endpoint count back off with sleeps.
constexpr std::size_t kMaxReplies = 4;

// The scripted gateway: one thread, poll() over the listener and its connections.
// Thread safety: Script() and Drain() may be called from any thread.
class ScriptedGateway {
 public:
  ScriptedGateway() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    FUZZ_CHECK(listener_ >= 0 && ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
                   ::listen(listener_, 64) == 0 &&
                   ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
               "cannot listen on 127.0.0.1");
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  int port() const { return port_; }

  void Script(std::deque<Reply> replies) {
    fencekit::MutexLock lock(mu_);
    replies_ = std::move(replies);
  }

 private:
  struct Conn {
    std::string in;
  };

  Reply Next() {
    fencekit::MutexLock lock(mu_);
    if (replies_.empty()) return Reply{404, R"({"error":"no more replies","code":5})"};
    Reply r = std::move(replies_.front());
    replies_.pop_front();
    return r;
  }

  static void SendAll(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Answers every complete request in `c`; false when the connection is to be closed.
  bool Answer(int fd, Conn& c) {
    for (;;) {
      auto end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) return true;
      std::size_t length = 0;
      auto cl = c.in.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) length = std::stoul(c.in.substr(cl + 16, 12));
      if (c.in.size() < end + 4 + length) return true;
      c.in.erase(0, end + 4 + length);
      Reply r = Next();
      if (r.status == 0) return false;
      SendAll(fd, "HTTP/1.1 " + std::to_string(r.status) +
                      " Scripted\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(r.body.size()) + "\r\n\r\n" + r.body);
    }
  }

  void Serve() {
    std::map<int, Conn> conns;
    for (;;) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) conns[fd];
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        int fd = fds[i].fd;
        char buf[4096];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        bool keep = n > 0;
        if (keep) {
          conns[fd].in.append(buf, static_cast<std::size_t>(n));
          keep = Answer(fd, conns[fd]);
        }
        if (!keep) {
          ::close(fd);
          conns.erase(fd);
        }
      }
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  fencekit::Mutex mu_;
  std::deque<Reply> replies_ FENCEKIT_GUARDED_BY(mu_);
};

ScriptedGateway& Gateway() {
  static auto* gateway = new ScriptedGateway();  // lives until exit, with its thread
  return *gateway;
}

// Times as EtcdProtocol promises them (0 .. kMaxTtlSeconds), which a caller may turn into
// milliseconds and add to a steady_clock time point.
static_assert(etcd::kMaxTtlSeconds * 1000 <
              std::numeric_limits<std::chrono::steady_clock::rep>::max() / 1'000'000 / 2);
bool UsableTtl(std::int64_t seconds) { return seconds >= 0 && seconds <= etcd::kMaxTtlSeconds; }
bool UsableWait(milliseconds d) {
  return d >= milliseconds(0) && d <= milliseconds(etcd::kMaxTtlSeconds * 1000);
}

void CheckToken(const etcd::EtcdProtocol& p, std::int64_t revision, std::string_view input) {
  auto t = p.Token("fuzz-lock", revision);
  FUZZ_CHECK(t.ok() == (revision >= 1), input);
  if (t.ok()) FUZZ_CHECK(t->value() == revision, input);
}

// What a reply may make of a call: unusable or failed (kUnavailable), gone (kNotFound), refused
// as malformed (kInvalidArgument), or refused by etcd's authentication (kUnauthenticated,
// kPermissionDenied: their message names the user and the prefix to grant).
void CheckStatus(const fencekit::Status& s) {
  FUZZ_CHECK(s.IsUnavailable() || s.IsNotFound() || s.IsInvalidArgument() ||
                 s.IsUnauthenticated() || s.IsPermissionDenied(),
             s.ToString());
}

const std::vector<std::string_view>& Ops() {
  static const std::vector<std::string_view> ops = {
      "grant",       "keepalive", "revoke",    "remaining",  "granted_ttl", "enqueue",
      "look",        "read_key",  "why_gone",  "read_head",  "read_holder", "move_key",
      "release_key", "exists",    "watch_key", "watch_line", "events"};
  return ops;
}

void Run(std::string_view op, etcd::EtcdProtocol& p, const std::deque<Reply>& replies,
         std::string_view input) {
  constexpr std::string_view kLock = "fuzz-lock";
  constexpr std::string_view kOwner = "fuzz-owner";
  if (op == "grant") {
    auto lease = p.GrantLease(milliseconds(5000));
    if (lease.ok()) FUZZ_CHECK(lease->id != 0 && UsableTtl(lease->ttl_s), input);
    if (!lease.ok()) CheckStatus(lease.status());
  } else if (op == "keepalive") {
    auto left = p.KeepAlive(42);
    if (left.ok()) FUZZ_CHECK(UsableTtl(*left), input);
    if (!left.ok()) CheckStatus(left.status());
  } else if (op == "revoke") {
    int sends = 0;
    auto s = p.Revoke(42, &sends);
    FUZZ_CHECK(sends >= 1, input);
    if (!s.ok()) CheckStatus(s);
  } else if (op == "remaining") {
    FUZZ_CHECK(UsableWait(p.Remaining(42)), input);
  } else if (op == "granted_ttl") {
    FUZZ_CHECK(UsableTtl(p.GrantedTtl(42)), input);
  } else if (op == "enqueue") {
    auto place = p.Enqueue(kLock, kOwner, etcd::LeaseRef{42, 5});
    if (place.ok()) {
      FUZZ_CHECK(place->mine >= 1, input);
      CheckToken(p, place->mine, input);
      CheckToken(p, place->first_rev, input);
    } else {
      CheckStatus(place.status());
    }
  } else if (op == "look") {
    auto place = p.Look(kLock, kOwner, 7);
    if (place.ok()) CheckToken(p, place->first_rev, input);
    if (!place.ok()) CheckStatus(place.status());
  } else if (op == "read_key") {
    auto key = p.ReadKey(kLock, kOwner);
    if (!key.ok()) CheckStatus(key.status());
  } else if (op == "release_key") {
    int sends = 0;
    auto released = p.ReleaseKey(kLock, kOwner, fencekit::FencingToken(), &sends);
    FUZZ_CHECK(sends >= 1 || !released.ok(), input);
    if (released.ok() && !released->done && released->gone.holder) {
      CheckToken(p, *released->gone.holder, input);
    }
    if (!released.ok()) CheckStatus(released.status());
  } else if (op == "why_gone") {
    auto gone = p.WhyGone(kLock, kOwner);
    if (gone.ok() && gone->holder) CheckToken(p, *gone->holder, input);
    if (!gone.ok()) CheckStatus(gone.status());
  } else if (op == "read_head") {
    auto head = p.ReadHead(kLock);
    if (head.ok() && head->held) CheckToken(p, head->token, input);
    if (!head.ok()) CheckStatus(head.status());
  } else if (op == "read_holder") {
    auto holder = p.ReadHolder(kLock);
    if (holder.ok() && holder->token) CheckToken(p, *holder->token, input);
    if (!holder.ok()) CheckStatus(holder.status());
  } else if (op == "move_key") {
    auto moved = p.MoveKeyToLease(kLock, kOwner, fencekit::FencingToken(), 43);
    if (!moved.ok()) CheckStatus(moved.status());
  } else if (op == "exists") {
    auto there = p.Exists(p.Key(kLock, kOwner));
    if (!there.ok()) CheckStatus(there.status());
  } else if (op == "watch_key" || op == "watch_line") {
    auto watch = op == "watch_key" ? p.WatchKey(p.Key(kLock, kOwner)) : p.WatchLine(kLock);
    if (!watch.ok()) return CheckStatus(watch.status());
    // The stream's messages, as the backend reads them, until it ends.
    for (int n = 0; n < 16; ++n) {
      auto message = (*watch)->NextMessage(milliseconds(200));
      if (!message.ok() || !message->has_value()) break;
      (void)etcd::EtcdProtocol::IsDeleteEvent(**message);
      (void)etcd::EtcdProtocol::IsCanceled(**message);
    }
  } else if (op == "events") {
    for (const Reply& r : replies) {
      (void)etcd::EtcdProtocol::IsDeleteEvent(r.body);
      (void)etcd::EtcdProtocol::IsCanceled(r.body);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t nl = input.find('\n');
  std::string_view op = input.substr(0, nl);
  std::deque<Reply> replies;
  for (std::size_t at = nl == std::string_view::npos ? input.size() : nl + 1;
       at < input.size() && replies.size() < kMaxReplies;) {
    std::size_t end = input.find('\n', at);
    if (end == std::string_view::npos) end = input.size();
    std::string_view line = input.substr(at, end - at);
    at = end + 1;
    Reply r;
    if (line.size() >= 4 && line[3] == ' ' && std::isdigit(line[0]) && std::isdigit(line[1]) &&
        std::isdigit(line[2])) {
      r.status = std::stoi(std::string(line.substr(0, 3)));
      line.remove_prefix(4);
    }
    if (r.status != 0 && r.status < 100) r.status = 200;
    r.body = std::string(line);
    for (char& c : r.body) {
      if (c == '\x1e') c = '\n';
    }
    replies.push_back(std::move(r));
  }

  std::vector<std::string_view> run;
  if (op == "all") {
    run = Ops();
  } else {
    auto known = std::find(Ops().begin(), Ops().end(), op);
    run.push_back(known != Ops().end()
                      ? *known
                      : Ops()[op.empty() ? 0 : static_cast<unsigned char>(op[0]) % Ops().size()]);
  }
  Gateway().Script(replies);
  {
    // More endpoints (all the scripted gateway) than replies: the Gateway fails over from one
    // to the next without the back-off sleeps it takes once every endpoint has failed.
    fencekit::lockclient::Endpoint e{"127.0.0.1", Gateway().port()};
    std::vector<fencekit::lockclient::Endpoint> endpoints(kMaxReplies + 2, e);
    etcd::EtcdProtocol protocol(std::move(endpoints), milliseconds(1000), 1, "etcd://fuzz");
    for (std::string_view one : run) Run(one, protocol, replies, input);
  }
  Gateway().Script({});
  return 0;
}
