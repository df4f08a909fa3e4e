#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "fencekit/procutil/child_process.h"

namespace fencekit::testing {

bool FullSoak() {
  const char* arm = std::getenv("FENCEKIT_SOAK");
  return arm != nullptr && std::string_view(arm) == "full";
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/fencekit-test-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) ADD_FAILURE() << "mkdtemp failed";
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int ConnectLoopback(std::uint16_t port, int receive_buffer) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect to port " << port << " failed: " << strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

RawConnection::RawConnection(std::uint16_t port) {
  fd_ = ConnectLoopback(port);
  if (fd_ < 0) return;
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

void RawConnection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      ADD_FAILURE() << "send failed: " << strerror(errno);
      return;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void RawConnection::ShutdownWrite() {
  if (shutdown(fd_, SHUT_WR) != 0) ADD_FAILURE() << "shutdown failed: " << strerror(errno);
}

bool RawConnection::Fill(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buf[65536];
  ssize_t n = recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  buffer_.append(buf, static_cast<std::size_t>(n));
  return true;
}

RawResponse RawConnection::Read(std::chrono::milliseconds timeout, bool return_interim) {
  return ReadOne(timeout, return_interim, /*has_body=*/true);
}

RawResponse RawConnection::ReadHeadAnswer(std::chrono::milliseconds timeout) {
  return ReadOne(timeout, /*return_interim=*/false, /*has_body=*/false);
}

RawResponse RawConnection::ReadOne(std::chrono::milliseconds timeout, bool return_interim,
                                   bool has_body) {
  RawResponse r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  std::size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(left())) return r;
  }
  std::istringstream head(buffer_.substr(0, end));
  std::string line;
  std::getline(head, line);
  if (line.size() < 12) return r;
  r.status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r.headers[name] = value;
  }
  buffer_.erase(0, end + 4);
  if (r.status / 100 == 1) return return_interim ? r : ReadOne(left(), false, has_body);
  std::size_t length =
      has_body ? std::strtoull(r.header("content-length").c_str(), nullptr, 10) : 0;
  while (buffer_.size() < length) {
    if (!Fill(left())) {
      r.status = 0;
      return r;
    }
  }
  r.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return r;
}

bool RawConnection::ClosedByPeer(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buf[4096];
  ssize_t n = recv(fd_, buf, sizeof buf, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

std::string Request(std::string_view method, std::string_view target,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    std::string_view body) {
  std::string out = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\n";
  out += "Host: 127.0.0.1\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  if (!body.empty() || method == "PUT") {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  out += body;
  return out;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string FencedBinary() { return FENCED_BINARY; }
std::string FencectlBinary() { return FENCECTL_BINARY; }

CommandResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& input, std::chrono::seconds timeout) {
  TempDir dir;
  std::string out_path = dir.File("out"), err_path = dir.File("err"), in_path = dir.File("in");
  {
    std::ofstream in(in_path);
    in << input;
  }
  // posix_spawnp, not fork: tests call this from several threads at once (the guards' racing
  // writers), and a forked child that allocates before exec can block forever on an allocator
  // lock another thread held at the fork (seen under AddressSanitizer).
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& added : env) replaced |= added.starts_with(std::string(name) + "=");
    if (!replaced) environment.emplace_back(entry);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> cenv, cargv;
  for (auto& e : environment) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = -1;
  const int spawn_error =
      posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    return {.exit_code = 127,
            .out = "",
            .err = "cannot run " + argv[0] + ": " + std::strerror(spawn_error) + "\n"};
  }
  if (timeout.count() <= 0) timeout = std::chrono::seconds(FullSoak() ? 1700 : 240);
  bool timed_out = false;
  int status = 0;
  if (const std::optional<int> exited = procutil::WaitForChild(pid, timeout)) {
    status = *exited;
  } else {
    timed_out = true;
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  if (timed_out) {
    r.err += "\n[" + argv[0] + " did not exit within " + std::to_string(timeout.count()) +
             " s: killed]\n";
  }
  return r;
}

FencedProcess::FencedProcess(const std::string& db, std::vector<std::string> args,
                             int max_open_files) {
  static std::atomic<int> instances{0};
  Status s = server_.Start({.binary = FencedBinary(),
                            .db = db,
                            .log_path = db + ".fenced-output." + std::to_string(++instances),
                            .args = std::move(args),
                            .max_open_files = max_open_files});
  EXPECT_TRUE(s.ok()) << s.message();
}

std::string FencedProcess::Output() const {
  return server_.process().OutputTail(std::string::npos);
}

}  // namespace fencekit::testing
