// Helpers shared by the tests: temporary folders, a raw HTTP/1.1 client over a POSIX socket
// (so tests can send exactly the bytes they want), and a `fenced` child process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fencekit/procutil/fenced_server.h"

namespace fencekit::testing {

// `r`'s value; on an error throws, which fails the test with "`doing`: <status>" (GoogleTest
// reports an exception from a test body), where a helper returning null would crash it.
template <typename T>
T ValueOrThrow(Result<T> r, std::string_view doing) {
  if (!r.ok()) throw std::runtime_error(std::string(doing) + ": " + r.status().ToString());
  return std::move(r).value();
}

// A fresh folder under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; last one wins
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A TCP socket connected to 127.0.0.1:port (`receive_buffer` > 0: SO_RCVBUF set first, so
// that it applies to the connection); -1 after ADD_FAILURE when the connection fails.
int ConnectLoopback(std::uint16_t port, int receive_buffer = 0);

// One TCP connection to 127.0.0.1:port. Every call fails the current test (ADD_FAILURE) on
// I/O errors instead of throwing.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port);
  ~RawConnection();
  bool connected() const { return fd_ >= 0; }
  void Send(std::string_view bytes);
  // Ends the sending side (the server reads EOF); answers can still be read.
  void ShutdownWrite();
  // Reads one response; status 0 when the connection closed or timed out first. Interim
  // (1xx) responses are skipped unless `return_interim`.
  RawResponse Read(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                   bool return_interim = false);
  // Reads the answer to a HEAD request: its header only (a Content-Length there counts no
  // bytes on the wire).
  RawResponse ReadHeadAnswer(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // True when the server closed the connection (reads EOF) within `timeout`.
  bool ClosedByPeer(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  bool Fill(std::chrono::milliseconds timeout);
  RawResponse ReadOne(std::chrono::milliseconds timeout, bool return_interim, bool has_body);
  int fd_ = -1;
  std::string buffer_;
};

// Formats one request; adds Host and Content-Length.
std::string Request(std::string_view method, std::string_view target,
                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                    std::string_view body = {});

// A `fenced` process started from the build tree, listening on a free loopback port
// (procutil::FencedServer); fails the test if it does not start, SIGKILLs it on destruction
// if still running. Thread safety: not safe for concurrent use.
class FencedProcess {
 public:
  // `args` are appended after --listen 127.0.0.1:0 --db <db>. `max_open_files` > 0 sets its
  // RLIMIT_NOFILE, as `ulimit -n` would.
  FencedProcess(const std::string& db, std::vector<std::string> args = {}, int max_open_files = 0);
  std::uint16_t port() const { return server_.port(); }
  pid_t pid() const { return server_.process().pid(); }
  std::string url() const { return server_.url(); }
  void Kill(int signal) { server_.process().Signal(signal); }
  // Waits for exit and returns the raw wait status.
  int Wait() { return server_.process().Wait(); }
  // Everything the process printed so far.
  std::string Output() const;

 private:
  procutil::FencedServer server_;
};

// `d` from now, on the steady clock: a deadline for Acquire and friends.
inline std::chrono::steady_clock::time_point Soon(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

// Waits for `pred` with a bound (an event, polled every millisecond, not a fixed sleep); false
// when the bound passed first.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds bound = std::chrono::seconds(10)) {
  auto deadline = Soon(bound);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A soak's arm (tests/CMakeLists.txt: suites named *Soak*). ctest runs each soak twice: its
// short arm in the default ladder, and at full length, with $FENCEKIT_SOAK=full, under the label
// soak (./scripts/test --full). Run directly, a test binary runs the short arm.
bool FullSoak();
// `full` at full length, else `short_arm`: a seeded run count, a sweep's points.
inline int SoakLength(int short_arm, int full) { return FullSoak() ? full : short_arm; }

// The whole file at `path`, as bytes; empty when it cannot be read (an expectation about its
// content then fails saying what it found).
std::string ReadWholeFile(const std::string& path);

// Path of the fenced and fencectl binaries built beside the tests (set by CMake).
std::string FencedBinary();
std::string FencectlBinary();

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out, err;
};
// Runs `argv` with `env` added to the environment, `input` on stdin; waits for it, at most
// `timeout` (0: 240 s, 1700 s in a full-length soak, each under its ctest timeout). Past it,
// the command is SIGKILLed (exit_code 137) and `err` ends with a line saying so: a hung command
// fails its test with its output instead of reaching ctest's timeout with none.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, const std::string& input = "",
                         std::chrono::seconds timeout = std::chrono::seconds(0));

}  // namespace fencekit::testing
