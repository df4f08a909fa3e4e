// PageServer: fencekit-demo --serve's own page, the story told live (demos/page/), and its feed
// (GET /events, Server-Sent Events from a StoryLog). fenced's /ui stays the view of the store;
// this page adds what only the demo knows: the clients, the lock service, the pause.
//
// It serves nothing but that: GET of the page's files and GET /events, on 127.0.0.1
// only, and takes no input beyond a request line and a header section (bounded). What a viewer
// sends never reaches another viewer, a response header or a log: the feed is written by the
// demo alone. Every wait has a bound: a request must arrive within read_timeout, each write
// must be taken within write_timeout, a stream whose viewer falls max_queued_bytes behind is
// closed (its page reconnects and is replayed to), and connections and streams are limited.
// Thread safety: safe for concurrent use. It serves on a thread of its own.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fencekit/common/status.h"
#include "live/story_log.h"

namespace fencekit::demo {

struct PageServerOptions {
  std::uint16_t port = 0;  // 0: a free one
  std::size_t max_connections = 32;
  std::size_t max_streams = 16;
  // Requests: the request line and header section at most this large.
  std::size_t max_header_bytes = 8 << 10;
  std::size_t max_queued_bytes = 2 << 20;  // per stream; a whole replay fits
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds write_timeout{10'000};
  std::chrono::milliseconds heartbeat{15'000};
};

class PageServer {
 public:
  // Listens on 127.0.0.1. kUnavailable when it cannot.
  static Result<std::unique_ptr<PageServer>> Start(PageServerOptions options, StoryLog story);
  ~PageServer();  // closes every connection
  PageServer(const PageServer&) = delete;
  PageServer& operator=(const PageServer&) = delete;

  std::uint16_t port() const;
  // Open streams (pages watching).
  std::size_t viewers() const;

  // The story as it happens (StoryLog's methods, sent to every open stream).
  void Begin();
  void Add(const Event& e, bool after);
  void End(boost::json::object outcome);

  struct Impl;

 private:
  explicit PageServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencekit::demo
