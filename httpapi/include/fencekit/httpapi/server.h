// Server: `fenced`, the HTTP front of a FencedStore. No Beast or Asio types appear here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit {

class FencedStore;

struct ServerOptions {
  // Address to listen on; port 0 picks a free port (see Server::port()).
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  // I/O threads. 0 means one per core but one, which is left to the store's writer thread.
  unsigned threads = 0;
  // Largest request body; larger ones get 413.
  std::size_t max_body_bytes = 1 << 20;
  // Largest request header block; larger ones get 431. It also bounds the rest of a request's
  // framing: a connection reads into a buffer of twice this size, so a chunk-size line with its
  // extensions, or a chunked body's trailer section, that does not fit in it gets 431 too.
  std::size_t max_header_bytes = 16 << 10;
  // The answers written but not yet taken by their clients, summed over all connections: an
  // answer larger than 64 KiB (a listing, the history, a large value) is admitted only while
  // the sum stays within this, else it gets 503 "busy". Smaller answers are part of each
  // connection's own bound (docs/security.md).
  std::size_t max_response_memory = 256 << 20;
  // A connection that sends nothing (or too slowly) for this long is closed.
  std::chrono::milliseconds read_timeout{30'000};
  // Each response must be fully written within this long, or the connection is closed: a
  // client that stops reading cannot hold a response (and its memory) for longer.
  std::chrono::milliseconds write_timeout{30'000};
  // Open connections at most. One more is answered 503 and closed at once, without reading
  // from it; connections already open keep being served. Lowered at Start to what the process's
  // file-descriptor limit (RLIMIT_NOFILE) allows, less a reserve for the database; see
  // Server::max_connections().
  std::size_t max_connections = 10'000;
  // Threads and queue for long reads (GET /v1/history, listings): off the I/O threads, bounded.
  // A long read beyond the queue gets 503 "busy". Fence administration has a queue of its own.
  unsigned long_read_threads = 1;
  std::size_t max_queued_long_reads = 32;
  // On Stop(), in-flight requests get this long to finish before connections are cut.
  std::chrono::milliseconds drain_timeout{10'000};

  // Bearer-token authentication (docs/http-api.md, "Authentication"): the JSON auth file of
  // principals, their token digests and rights. Start fails naming what is wrong with it.
  // Empty: no authentication; every route is open but fence administration.
  std::string auth_file;
  // Without auth_file, Start refuses a host that is not loopback (127.0.0.0/8, ::1,
  // "localhost"), as anyone who reaches the port could write every key. True allows it anyway.
  bool insecure_no_auth = false;
  // HTTPS (TLS 1.2 or newer): PEM certificate chain and private key; both or neither. Start
  // fails on an unreadable or mismatched pair.
  std::string tls_cert_file;
  std::string tls_key_file;
  // GET /v1/events (the store's decisions as Server-Sent Events, drawn by GET /ui): streams open
  // at once (one more is answered 503 too_many_streams), the event text waiting for one slow
  // reader (beyond it, events are skipped and the reader is told how many), and how often an
  // idle stream gets a heartbeat, a comment line by which a peer that is gone is found.
  std::size_t max_event_streams = 16;
  // Under auth_file: streams one principal may hold open at once (one more is answered 503
  // too_many_streams), so that one client cannot take every stream.
  std::size_t max_event_streams_per_principal = 4;
  std::size_t max_queued_event_bytes = 256 << 10;
  std::chrono::milliseconds event_heartbeat{15'000};
  // GET /healthz (the database answers a read) and /readyz (and the store accepts writes):
  // the longest wait for the probe's read; past it, 503.
  std::chrono::milliseconds health_timeout{2'000};
  // Log every request in one line (method, target, status, bytes, duration, principal). Writes
  // that are not accepted are logged in one line each, always.
  bool access_log = false;
  // Where log lines go: called once per line (without its newline) on a logging thread, which
  // a slow sink never lets stall a request (lines beyond a bounded queue are dropped and
  // counted). Null: standard error.
  std::function<void(std::string_view line)> log;
  // More metrics for GET /metrics, in Prometheus' text format, appended to the server's own
  // (fenced: its verifying lock client's, RenderPrometheus in lock_client.h). Called on an I/O
  // thread for each scrape; must be quick and thread-safe. Null: none.
  std::function<std::string()> extra_metrics;
};

// Thread safety: Start/Stop/Wait may be called from any thread; Stop is also safe from a
// signal-handling thread. The store must outlive the server. Destroying the server stops it,
// waits for it, then waits for the store to answer every write the server gave it (an answer
// reaches the server's connections and metrics): at once when the store was closed first, else
// as long as the store takes (a write waiting for the lock service to confirm its token), up to
// 5 minutes, past which the process aborts rather than free what a late answer would use.
class Server {
 public:
  // Binds and starts serving on background threads. The store is not owned. kInvalidArgument
  // for a bad auth file, TLS pair, or an open listen address without auth (see ServerOptions).
  static Result<std::unique_ptr<Server>> Start(ServerOptions options, FencedStore* store);
  virtual ~Server() = default;  // Stops and waits.

  // The bound port (useful with port 0).
  virtual std::uint16_t port() const = 0;
  // The connection limit in force (options.max_connections, or less; see ServerOptions).
  virtual std::size_t max_connections() const = 0;
  // Stops accepting, lets in-flight requests finish (up to drain_timeout), closes idle
  // connections. Returns at once; Wait() blocks until done.
  virtual void Stop() = 0;
  virtual void Wait() = 0;
};

}  // namespace fencekit
