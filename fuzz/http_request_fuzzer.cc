// Fuzz target "http_request": the whole request path of fenced. The input's bytes go over a real
// TCP connection on loopback to a real Server (Session: HTTP parsing with its limits, framing
// checks, Handler, the write path) in front of a real FencedStore on a SQLite file in a temporary
// folder, and everything the server answers is read back until it closes the connection.
//
// Input: one selector byte (bit 0: the server without authentication, or the one with --auth
// whose store verifies tokens on advance), then the bytes sent, pipelined requests included.
// The store is shared by all inputs, as a running server's is: writes of earlier inputs are
// there (see docs/fuzzing.md on reproducing).
//
// What must hold, for any bytes: the server answers or closes within the deadline and stays up
// for the next connection; every response's header section is printable ASCII (nothing from the
// request reaches a header unencoded); every JSON body parses; no 500 and no storage_error.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "support/fuzz_support.h"

namespace {

using fencekit::fuzz::Fail;
using std::chrono::milliseconds;

// Token digests: printf %s fuzz-admin-token | sha256sum, and fuzz-app-token.
constexpr std::string_view kAuthFile = R"({"principals": [
  {"name": "admin", "admin": true,
   "token_sha256": "fb5f5fe58160617e1487667a8133f89a396f563247c75a8e2824af6e08a810fc"},
  {"name": "app", "read": ["app/", ""], "write": ["app/"],
   "token_sha256": "013f52741c32cbaf97abd5e0e73c53240eb523477a0864724d8b3ec53fdd03dc"}
]})";

// The longest an input may take from connect to the server's close.
constexpr milliseconds kDeadline{10'000};

struct Instance {
  std::unique_ptr<fencekit::FencedStore> store;
  std::unique_ptr<fencekit::Server> server;
};

Instance Start(bool with_auth) {
  const std::string& dir = fencekit::fuzz::ProcessTempDir();
  fencekit::StoreOptions store_options;
  store_options.path = dir + (with_auth ? "/auth.db" : "/open.db");
  // No fsync per commit: the fuzzer looks for wrong answers, not lost power.
  store_options.durability = fencekit::Durability::kNormal;
  store_options.history_limit = 500;
  store_options.lock_for = {{"bound/", "bound-lock"}};
  if (with_auth) {
    // Verification on advance, decided by the token alone so that runs repeat: even tokens
    // are the holder's, 3 mod 10 cannot be asked, the rest are not current.
    store_options.verify =
        [](std::string_view,
           fencekit::FencingToken token) -> fencekit::Result<fencekit::TokenVerdict> {
      if (token.value() % 10 == 3) return fencekit::Status::Unavailable("fuzz: verifier down");
      return fencekit::TokenVerdict{token.value() % 2 == 0, "fuzz:verifier"};
    };
  }
  auto store = fencekit::FencedStore::Open(store_options);
  if (!store.ok()) Fail("cannot open the store", store.status().ToString());

  fencekit::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.max_body_bytes = 64 << 10;
  options.max_header_bytes = 8 << 10;
  options.read_timeout = milliseconds(3000);
  options.write_timeout = milliseconds(3000);
  options.drain_timeout = milliseconds(1000);
  options.max_queued_long_reads = 4;
  if (with_auth) {
    options.auth_file = dir + "/auth.json";
    std::ofstream(options.auth_file) << kAuthFile;
  }
  auto server = fencekit::Server::Start(options, store->get());
  if (!server.ok()) Fail("cannot start the server", server.status().ToString());
  return Instance{std::move(store).value(), std::move(server).value()};
}

// Lives until exit: a server outlives every connection of every input.
Instance& Get(bool with_auth) {
  static auto* open = new Instance(Start(false));
  static auto* authed = new Instance(Start(true));
  return with_auth ? *authed : *open;
}

// Sends `request` (all of it, unless the server closes first), then half-closes, and returns
// everything the server sent until it closed the connection.
std::string Exchange(std::uint16_t port, std::string_view request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) Fail("socket", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    Fail("cannot connect to the server (is it still up?)", std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  std::string response;
  bool sending = true;
  for (;;) {
    if (sending && request.empty()) {
      ::shutdown(fd, SHUT_WR);
      sending = false;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0};
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      Fail("the server neither answered nor closed the connection within 10 s",
           "sent so far: " + fencekit::fuzz::Printable(response));
    }
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    if (p.revents & POLLOUT) {
      ssize_t n = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
      if (n > 0) {
        request.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        sending = false;  // the server closed: read what it said
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16384];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        response.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        break;  // closed (or reset: the answer may be cut short)
      }
    }
  }
  ::close(fd);
  return response;
}

bool Visible(unsigned char c) { return (c >= 0x20 && c < 0x7F) || c == '\t'; }

// A response's header section starting at `at`.
struct Head {
  bool complete = false;  // false: the bytes end inside it (a cut-short answer)
  std::size_t body_at = 0;
  std::size_t length = 0;
  bool json = false;
};

// nullopt when the header section breaks a rule; *why says which.
std::optional<Head> ReadHead(std::string_view out, std::size_t at, std::string* why) {
  Head h;
  std::string_view rest = out.substr(at);
  std::size_t end = rest.find("\r\n\r\n");
  std::string_view head = end == std::string_view::npos ? rest : rest.substr(0, end);
  for (char c : head) {
    if (!Visible(static_cast<unsigned char>(c)) && c != '\r' && c != '\n') {
      *why = "a byte outside printable ASCII in a header section";
      return std::nullopt;
    }
  }
  if (end == std::string_view::npos) return h;  // cut short
  h.complete = true;
  h.body_at = at + end + 4;
  if (!(head.starts_with("HTTP/1.1 ") || head.starts_with("HTTP/1.0 ")) || head.size() < 12) {
    *why = "a response that does not start with a status line";
    return std::nullopt;
  }
  int status = std::atoi(std::string(head.substr(9, 3)).c_str());
  if (status < 100 || status > 599 || status == 500) {
    *why = "status " + std::to_string(status);
    return std::nullopt;
  }
  for (std::size_t pos = head.find("\r\n"); pos != std::string_view::npos;) {
    std::size_t next = head.find("\r\n", pos + 2);
    std::string_view line = head.substr(
        pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    pos = next;
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        line.find('\n') != std::string_view::npos || line.find('\r') != std::string_view::npos) {
      *why = "a malformed header line";
      return std::nullopt;
    }
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (name == "content-length") h.length = std::strtoull(std::string(value).c_str(), nullptr, 10);
    if (name == "content-type") h.json = value.starts_with("application/json");
  }
  if (status < 200) h.length = 0;  // 100 Continue
  return h;
}

// True when some reading of `out` as a series of responses breaks no rule. A response's
// Content-Length counts no bytes when it answers a HEAD, which only the request says: both
// readings are tried.
bool AnswersOk(std::string_view out, std::string* why) {
  std::vector<bool> reach(out.size() + 1, false);
  reach[0] = true;
  for (std::size_t at = 0; at <= out.size(); ++at) {
    if (!reach[at]) continue;
    if (at == out.size()) return true;
    auto head = ReadHead(out, at, why);
    if (!head) continue;
    if (!head->complete) return true;
    reach[head->body_at] = true;  // the answer to a HEAD
    std::size_t body_end = head->body_at + head->length;
    if (body_end > out.size()) return true;  // cut short
    if (head->length == 0) continue;
    std::string_view body = out.substr(head->body_at, head->length);
    if (head->json) {
      boost::system::error_code ec;
      auto v = boost::json::parse(body, ec);
      if (ec || !v.is_object()) {
        *why = "a JSON body that does not parse";
        continue;
      }
      if (auto* e = v.as_object().if_contains("error");
          e != nullptr && e->is_string() && e->as_string() == "storage_error") {
        *why = "storage_error";
        continue;
      }
    }
    reach[body_end] = true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Get(false);
  Get(true);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool with_auth = (data[0] & 1) != 0;
  std::string_view request(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string out = Exchange(Get(with_auth).server->port(), request);
  std::string why;
  if (!AnswersOk(out, &why)) Fail("a response breaks a rule: " + why, out);
  return 0;
}
