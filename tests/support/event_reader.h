// A client of fenced's GET /v1/events over a raw loopback socket: the response's status and
// header, then one Server-Sent Events block at a time, each parsed as the /ui page parses it.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fencekit::testing {

// One block of the stream (the lines up to a blank line).
struct SseBlock {
  std::string event;                  // the "event:" field, "message" when absent
  std::string data;                   // the "data:" lines, joined by '\n'
  std::string id;                     // the "id:" field
  std::vector<std::string> comments;  // the ':' lines, without the colon
  std::string raw;                    // the block as received
};

// Thread safety: not safe for concurrent use. Failures are reported with ADD_FAILURE.
class EventReader {
 public:
  // Connects and sends GET `target` with `headers`. `receive_buffer` > 0 sets SO_RCVBUF first
  // (a small one makes a reader that does not read hold the server's writes sooner).
  explicit EventReader(std::uint16_t port,
                       std::vector<std::pair<std::string, std::string>> headers = {},
                       int receive_buffer = 0, std::string target = "/v1/events");
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // Reads the response's status line and header; the status (0 if none came in `timeout`).
  int ReadHeader(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The header as received (status line included), after ReadHeader.
  const std::string& header() const { return header_; }
  // Everything after the header, for a refusal's body (reads until the peer closes).
  std::string ReadRest(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The next block; nullopt when the peer closed or `timeout` passed first.
  std::optional<SseBlock> Next(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The next block that is an event (not only comments), parsed; nullopt as Next.
  std::optional<std::pair<std::string, boost::json::object>> NextEvent(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // True when the peer closed the connection within `timeout` (blocks are skipped).
  bool ClosedByPeer(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Closes this end.
  void Close();

 private:
  // Reads more bytes; false on close, error or timeout.
  bool Fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string header_;
  std::string buffer_;
  bool closed_ = false;
};

}  // namespace fencekit::testing
