#include "fencekit/procutil/delay_proxy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <string_view>
#include <vector>

#include "exchange.h"
#include "fencekit/common/mutex.h"

namespace fencekit::procutil {
namespace {

// Sends all of `data` on a blocking socket; false when the peer is gone.
bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool Matches(std::string_view chunk, const std::string& needle) {
  return needle.empty() || chunk.find(needle) != std::string_view::npos;
}

}  // namespace

// One proxied connection. Owned by the serving thread alone.
struct DelayProxy::Conn {
  int client = -1;
  int server = -1;
  bool held = false;
  std::string held_bytes;  // read from the client while held, not yet sent
  bool cut_on_reply = false;
  bool awaiting_answer = false;  // let go by Release(); the server has not answered yet
  bool client_eof = false;       // the client finished sending (passed on once nothing is held)
  bool server_eof = false;
  bool closed = false;

  void Close() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
    client = server = -1;
    closed = true;
  }
};

Result<std::unique_ptr<DelayProxy>> DelayProxy::Start(std::uint16_t target) {
  return Start("127.0.0.1", target);
}

Result<std::unique_ptr<DelayProxy>> DelayProxy::Start(const std::string& host,
                                                      std::uint16_t target) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); e != 0 || found == nullptr) {
    return Status::Unavailable("proxy: cannot resolve " + host + " to an IPv4 address: " +
                               ::gai_strerror(e));
  }
  const std::uint32_t ip = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(found);
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) {
    return Status::Unavailable(std::string("proxy: socket failed: ") + std::strerror(errno));
  }
  sockaddr_in addr = LoopbackAddress(0);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int error = errno;
    ::close(listener);
    return Status::Unavailable(std::string("proxy: cannot listen on loopback: ") +
                               std::strerror(error));
  }
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(listener);
    return Status::Unavailable(std::string("proxy: eventfd failed: ") + std::strerror(errno));
  }
  return std::unique_ptr<DelayProxy>(
      new DelayProxy(listener, wake, ntohs(addr.sin_port), ip, target));
}

DelayProxy::DelayProxy(int listener, int wake, std::uint16_t port, std::uint32_t target_ip,
                       std::uint16_t target)
    : listener_(listener), wake_(wake), port_(port), target_ip_(target_ip), target_(target) {
  thread_ = std::thread([this] { Serve(); });
}

DelayProxy::~DelayProxy() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  Wake();
  thread_.join();
  ::close(listener_);
  ::close(wake_);
}

void DelayProxy::Wake() {
  std::uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
}

void DelayProxy::HoldWhen(std::string needle) {
  MutexLock lock(mu_);
  hold_armed_ = true;
  hold_needle_ = std::move(needle);
}

void DelayProxy::HoldAll() {
  MutexLock lock(mu_);
  hold_all_ = true;
  const std::uint64_t mine = ++hold_alls_;
  lock.Unlock();
  Wake();
  lock.Lock();
  while (hold_alls_applied_ < mine && !stopping_) cv_.Wait(mu_);
}

void DelayProxy::Release() {
  MutexLock lock(mu_);
  hold_armed_ = false;
  hold_all_ = false;
  const std::uint64_t mine = ++releases_;
  lock.Unlock();
  Wake();
  lock.Lock();
  while (releases_done_ < mine && !stopping_) cv_.Wait(mu_);
}

bool DelayProxy::WaitForHeld(int n, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (held_ < n && cv_.WaitUntil(mu_, deadline)) {
  }
  return held_ >= n;
}

bool DelayProxy::WaitForAnswers(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (answered_ < released_ && cv_.WaitUntil(mu_, deadline)) {
  }
  return answered_ >= released_;
}

void DelayProxy::CutReplyWhen(std::string needle) {
  MutexLock lock(mu_);
  cut_armed_ = true;
  cut_needle_ = std::move(needle);
}

bool DelayProxy::WaitForCuts(int n, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (cuts_ < n && cv_.WaitUntil(mu_, deadline)) {
  }
  return cuts_ >= n;
}

void DelayProxy::Retarget(std::uint16_t target) {
  MutexLock lock(mu_);
  target_ = target;
  const std::uint64_t mine = ++retargets_;
  lock.Unlock();
  Wake();
  // Returns once the serving thread has closed the old connections, so that nothing the caller
  // sends afterwards still flows through one of them (bounded: the thread serves in a loop).
  lock.Lock();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (retargets_applied_ < mine && !stopping_ && cv_.WaitUntil(mu_, deadline)) {
  }
}

void DelayProxy::Serve() {
  std::list<Conn> conns;
  std::uint64_t releases_seen = 0, retargets_seen = 0;
  std::vector<pollfd> fds;
  std::vector<std::pair<Conn*, bool /*client side*/>> owners;
  char buf[65536];

  // The server answered (or closed) a connection that Release() let go.
  auto answered = [&](Conn& c) {
    if (!c.awaiting_answer) return;
    c.awaiting_answer = false;
    MutexLock lock(mu_);
    ++answered_;
    cv_.NotifyAll();
  };
  auto close = [&](Conn& c) {
    answered(c);
    c.Close();
  };
  // What was held goes to the server; a client that finished meanwhile is passed on. Returns
  // whether it let one go.
  auto flush = [&](Conn& c) {
    if (!c.held) return false;
    c.held = false;
    c.awaiting_answer = true;
    if (!SendAll(c.server, c.held_bytes)) close(c);
    c.held_bytes.clear();
    if (!c.closed && c.client_eof) ::shutdown(c.server, SHUT_WR);
    return true;
  };

  for (;;) {
    std::uint16_t target;
    bool hold_all;
    {
      MutexLock lock(mu_);
      if (stopping_) break;
      target = target_;
      hold_all = hold_all_;
      if (hold_alls_applied_ != hold_alls_) {  // this pass polls no connection
        hold_alls_applied_ = hold_alls_;
        cv_.NotifyAll();
      }
      if (retargets_ != retargets_seen) {
        retargets_seen = retargets_;
        lock.Unlock();
        for (Conn& c : conns) close(c);
        lock.Lock();
        retargets_applied_ = retargets_seen;
        cv_.NotifyAll();
      }
      if (releases_ != releases_seen) {
        releases_seen = releases_;
        lock.Unlock();
        int let_go = 0;
        for (Conn& c : conns) let_go += flush(c);
        lock.Lock();
        held_ = 0;
        released_ += let_go;
        releases_done_ = releases_seen;
        cv_.NotifyAll();
      }
    }
    conns.remove_if([](const Conn& c) { return c.closed; });

    fds.clear();
    owners.clear();
    fds.push_back({wake_, POLLIN, 0});
    fds.push_back({listener_, POLLIN, 0});
    for (Conn& c : conns) {
      if (hold_all) break;
      if (!c.held && !c.client_eof) {
        fds.push_back({c.client, POLLIN, 0});
        owners.emplace_back(&c, true);
      }
      if (!c.server_eof) {
        fds.push_back({c.server, POLLIN, 0});
        owners.emplace_back(&c, false);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;

    if (fds[0].revents != 0) {
      std::uint64_t n;
      (void)!::read(wake_, &n, sizeof n);
    }
    if (fds[1].revents != 0) {
      int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr = LoopbackAddress(target);
        addr.sin_addr.s_addr = target_ip_;
        if (server >= 0 &&
            ::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          conns.push_back(Conn{.client = client, .server = server});
        } else {
          if (server >= 0) ::close(server);
          ::close(client);  // as a refused connection would look to the client
        }
      }
    }
    for (std::size_t k = 2; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      auto [c, client_side] = owners[k - 2];
      if (c->closed) continue;
      int from = client_side ? c->client : c->server;
      ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && !client_side) {
        close(*c);
        continue;
      }
      std::string_view chunk(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
      if (client_side) {
        if (n <= 0) {
          // The client is done (or gone): what it sent still gets its answer from the server.
          c->client_eof = true;
          if (!c->held) ::shutdown(c->server, SHUT_WR);
          if (c->server_eof && !c->held) close(*c);
          continue;
        }
        {
          MutexLock lock(mu_);
          if (hold_armed_ && Matches(chunk, hold_needle_)) {
            c->held = true;
            ++held_;
            cv_.NotifyAll();
          }
          if (cut_armed_ && Matches(chunk, cut_needle_)) {
            cut_armed_ = false;
            c->cut_on_reply = true;
          }
        }
        if (c->held) {
          c->held_bytes.append(chunk);
        } else if (!SendAll(c->server, chunk)) {
          close(*c);
        }
        continue;
      }
      answered(*c);
      if (n == 0) {
        c->server_eof = true;
        ::shutdown(c->client, SHUT_WR);
        if (c->client_eof && !c->held) close(*c);
        continue;
      }
      if (c->cut_on_reply) {
        close(*c);
        MutexLock lock(mu_);
        ++cuts_;
        cv_.NotifyAll();
        continue;
      }
      if (!SendAll(c->client, chunk)) close(*c);
    }
  }
  for (Conn& c : conns) close(c);
  MutexLock lock(mu_);
  releases_done_ = releases_;
  cv_.NotifyAll();
}

}  // namespace fencekit::procutil
