#include "delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>

namespace fencekit::demo {

DelayProxy::DelayProxy(std::uint16_t target) : target_(target) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  listen(listener_, 16);
  socklen_t len = sizeof addr;
  getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

DelayProxy::~DelayProxy() {
  Release();
  shutdown(listener_, SHUT_RDWR);
  close(listener_);
  if (thread_.joinable()) thread_.join();
}

void DelayProxy::Release() {
  std::lock_guard lock(mu_);
  released_ = true;
  cv_.notify_all();
}

void DelayProxy::Serve() {
  int client = accept(listener_, nullptr, nullptr);
  if (client < 0) return;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }
  int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(target_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buf[65536];
    bool open = true;
    while (open && poll(fds, 2, 30'000) > 0) {
      for (int i = 0; i < 2 && open; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = recv(fds[i].fd, buf, sizeof buf, 0);
        if (n <= 0 || send(fds[1 - i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
          open = false;
        }
      }
    }
  }
  close(server);
  close(client);
}

}  // namespace fencekit::demo
