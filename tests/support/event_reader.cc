#include "support/event_reader.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <cerrno>
#include <cstring>

#include "support/test_support.h"

namespace fencekit::testing {

EventReader::EventReader(std::uint16_t port,
                         std::vector<std::pair<std::string, std::string>> headers,
                         int receive_buffer, std::string target) {
  fd_ = ConnectLoopback(port, receive_buffer);
  if (fd_ < 0) return;
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [name, value] : headers) request += name + ": " + value + "\r\n";
  request += "\r\n";
  if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ADD_FAILURE() << "send failed: " << strerror(errno);
  }
}

EventReader::~EventReader() { Close(); }

void EventReader::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool EventReader::Fill(std::chrono::steady_clock::time_point deadline) {
  if (fd_ < 0 || closed_) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  char buf[16384];
  ssize_t n = recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) {
    closed_ = true;
    return false;
  }
  buffer_.append(buf, static_cast<std::size_t>(n));
  return true;
}

int EventReader::ReadHeader(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(deadline)) return 0;
  }
  header_ = buffer_.substr(0, end + 4);
  buffer_.erase(0, end + 4);
  // "HTTP/1.1 200 OK"
  if (header_.size() < 12) return 0;
  return std::atoi(header_.c_str() + 9);
}

std::string EventReader::ReadRest(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Fill(deadline)) {
  }
  return std::exchange(buffer_, std::string());
}

std::optional<SseBlock> EventReader::Next(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t end;
  while ((end = buffer_.find("\n\n")) == std::string::npos) {
    if (!Fill(deadline)) return std::nullopt;
  }
  SseBlock b;
  b.raw = buffer_.substr(0, end);
  buffer_.erase(0, end + 2);
  b.event = "message";
  std::size_t at = 0;
  while (at <= b.raw.size()) {
    std::size_t nl = b.raw.find('\n', at);
    std::string line = b.raw.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? b.raw.size() + 1 : nl + 1;
    if (line.starts_with(':')) {
      b.comments.push_back(line.substr(1));
      continue;
    }
    auto colon = line.find(':');
    std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (value.starts_with(' ')) value.erase(0, 1);
    if (field == "event") b.event = value;
    if (field == "id") b.id = value;
    if (field == "data") b.data += (b.data.empty() ? "" : "\n") + value;
  }
  return b;
}

std::optional<std::pair<std::string, boost::json::object>> EventReader::NextEvent(
    std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto b = Next(std::max(left, std::chrono::milliseconds(0)));
    if (!b) return std::nullopt;
    if (b->data.empty()) continue;  // a comment (the opening line, a heartbeat)
    boost::system::error_code ec;
    auto v = boost::json::parse(b->data, ec);
    if (ec || !v.is_object()) {
      ADD_FAILURE() << "an event's data is not a JSON object: " << b->raw;
      return std::nullopt;
    }
    return std::make_pair(b->event, v.as_object());
  }
}

bool EventReader::ClosedByPeer(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!closed_) {
    if (!Fill(deadline) && !closed_) return false;
  }
  return true;
}

}  // namespace fencekit::testing
