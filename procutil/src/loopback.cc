#include "fencekit/procutil/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "exchange.h"

namespace fencekit::procutil {

sockaddr_in LoopbackAddress(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

Result<std::uint16_t> FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket failed: ") + std::strerror(errno));
  sockaddr_in addr = LoopbackAddress(0);
  socklen_t len = sizeof addr;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  int error = errno;
  ::close(fd);
  if (!ok) {
    return Status::Unavailable(std::string("cannot find a free loopback port: ") +
                               std::strerror(error));
  }
  return static_cast<std::uint16_t>(ntohs(addr.sin_port));
}

std::string Exchange(std::uint16_t port, std::string_view request,
                     const std::function<bool(const std::string&)>& complete,
                     std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr = LoopbackAddress(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "";
  }
  std::string reply;
  char buf[4096];
  while (!complete(reply)) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

std::string HttpCall(std::uint16_t port, std::string_view method, std::string_view target,
                     std::string_view body, std::chrono::milliseconds timeout,
                     std::string_view authorization) {
  std::string request =
      std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
      (body.empty() ? "" : "Content-Type: application/json\r\n") +
      (authorization.empty() ? std::string()
                             : "Authorization: " + std::string(authorization) + "\r\n") +
      "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
      std::string(body);
  // Complete once the body is: a server may answer "Connection: close" and still leave the
  // connection open (etcd's peer port does), so waiting for EOF would cost the whole timeout.
  auto body_start = [](const std::string& reply) { return reply.find("\r\n\r\n"); };
  auto length = [](const std::string& reply, std::size_t head_end) -> std::size_t {
    for (std::size_t at = reply.find("\r\n"); at < head_end; at = reply.find("\r\n", at + 2)) {
      constexpr std::string_view kName = "content-length:";
      if (::strncasecmp(reply.c_str() + at + 2, kName.data(), kName.size()) == 0) {
        return std::strtoul(reply.c_str() + at + 2 + kName.size(), nullptr, 10);
      }
    }
    return std::string::npos;  // no length: read until the peer closes
  };
  std::string reply = Exchange(
      port, request,
      [&](const std::string& r) {
        std::size_t head_end = body_start(r);
        if (head_end == std::string::npos) return false;
        std::size_t n = length(r, head_end);
        return n != std::string::npos && r.size() >= head_end + 4 + n;
      },
      timeout);
  std::size_t head_end = body_start(reply);
  if (!reply.starts_with("HTTP/1.1 200") || head_end == std::string::npos) return "";
  std::size_t n = length(reply, head_end);
  std::string got = reply.substr(head_end + 4);
  return n != std::string::npos && got.size() < n ? "" : got;
}

Status StartOnLoopbackPort(std::uint16_t fixed, std::uint16_t* port,
                           const std::function<Status(bool* port_taken)>& start_on) {
  bool taken = false;
  if (fixed != 0) {
    *port = fixed;
    return start_on(&taken);
  }
  Status last = Status::Ok();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto free = FreeLoopbackPort();
    if (!free.ok()) return free.status();
    *port = *free;
    taken = false;
    last = start_on(&taken);
    if (last.ok() || !taken) return last;
  }
  return last;
}

}  // namespace fencekit::procutil
