#include "live/fenced_feed.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <cerrno>
#include <string_view>

#include "fencekit/common/mutex.h"

namespace fencekit::demo {
namespace {

using namespace std::chrono_literals;

// fenced sends a heartbeat every 15 s (--event-heartbeat): a stream silent for longer than this
// is taken for broken.
constexpr std::chrono::milliseconds kIdle = 60s;
constexpr std::chrono::milliseconds kConnectTimeout = 5s;

// The "event" and joined "data" fields of one block of Server-Sent Events.
void ParseBlock(std::string_view block, std::string& event, std::string& data) {
  event = "message";
  data.clear();
  while (!block.empty()) {
    auto nl = block.find('\n');
    std::string_view line = block.substr(0, nl);
    block.remove_prefix(nl == std::string_view::npos ? block.size() : nl + 1);
    auto colon = line.find(':');
    if (colon == 0) continue;  // a comment: the opening line, a heartbeat
    std::string_view name = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    if (name == "event") event = value;
    if (name == "data") data.append(data.empty() ? "" : "\n").append(value);
  }
}

}  // namespace

FencedFeed::FencedFeed(std::uint16_t port, OnDecision on_decision)
    : port_(port), on_decision_(std::move(on_decision)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Run(); });
}

FencedFeed::~FencedFeed() {
  stopping_ = true;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  thread_.join();
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

bool FencedFeed::WaitConnected(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (!connected_ && cv_.WaitUntil(mu_, deadline)) {
  }
  return connected_;
}

void FencedFeed::Run() {
  while (!stopping_) {
    Stream();
    {
      MutexLock lock(mu_);
      connected_ = false;
    }
    pollfd p{wake_[0], POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(kRetry.count()));
  }
}

bool FencedFeed::Wait(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p[2] = {{fd, events, 0}, {wake_[0], POLLIN, 0}};
  int n = ::poll(p, 2, static_cast<int>(timeout.count()));
  return n > 0 && p[1].revents == 0 && !stopping_;
}

bool FencedFeed::Receive(int fd, std::string& buffer, std::size_t max,
                         std::chrono::milliseconds timeout) {
  if (buffer.size() >= max || !Wait(fd, POLLIN, timeout)) return false;
  char chunk[8192];
  ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, max - buffer.size()), 0);
  if (n <= 0) return false;
  buffer.append(chunk, static_cast<std::size_t>(n));
  return true;
}

void FencedFeed::Stream() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool now = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  const bool pending = !now && errno == EINPROGRESS;
  int error = 0;
  socklen_t len = sizeof error;
  const std::string request =
      "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
      "\r\nAccept: text/event-stream\r\n\r\n";
  if ((now || (pending && Wait(fd, POLLOUT, kConnectTimeout) &&
               ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0)) &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    std::string buffer;
    std::size_t end;
    while ((end = buffer.find("\r\n\r\n")) == std::string::npos &&
           Receive(fd, buffer, kMaxHeaderBytes, kConnectTimeout)) {
    }
    if (end != std::string::npos && buffer.starts_with("HTTP/1.1 200 ")) {
      buffer.erase(0, end + 4);
      {
        MutexLock lock(mu_);
        connected_ = true;
      }
      cv_.NotifyAll();
      std::string event, data;
      while (true) {
        while ((end = buffer.find("\n\n")) != std::string::npos) {
          ParseBlock(std::string_view(buffer).substr(0, end), event, data);
          buffer.erase(0, end + 2);
          boost::system::error_code ec;
          auto v = boost::json::parse(data, ec);
          if (event == "decision" && !ec && v.is_object()) on_decision_(v.as_object());
        }
        if (!Receive(fd, buffer, kMaxEventBytes, kIdle)) break;
      }
    }
  }
  ::close(fd);
}

}  // namespace fencekit::demo
