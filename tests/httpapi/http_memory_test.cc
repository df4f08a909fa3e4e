// What a hostile client can make a real fenced process hold in memory, measured from /proc:
// request framing that never ends (chunk extensions, trailers, whitespace), answers nobody
// reads, and slow readers. With and without --auth, and over TLS.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "support/pki.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using namespace std::chrono_literals;
using testing::FencedProcess;
using testing::RawConnection;
using testing::Request;
using testing::RunCommand;
using testing::TempDir;
using testing::WaitFor;

// A field of /proc/PID/status in KiB ("VmRSS", "VmHWM").
std::size_t StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
    }
  }
  ADD_FAILURE() << "no " << field << " in /proc/" << pid << "/status";
  return 0;
}

// Starts the peak resident size (VmHWM) anew at the current size.
void ResetPeak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

std::uint64_t MetricValue(const std::string& metrics, const std::string& line_prefix) {
  auto at = metrics.find("\n" + line_prefix + " ");
  if (at == std::string::npos) return UINT64_MAX;
  return std::strtoull(metrics.c_str() + at + line_prefix.size() + 2, nullptr, 10);
}

// Free memory from the allocator goes back to the kernel at once: large blocks are mapped on
// their own (glibc), and AddressSanitizer keeps no quarantine. So RSS shows what fenced holds.
class UnbufferedMalloc {
 public:
  UnbufferedMalloc() {
    const char* asan = std::getenv("ASAN_OPTIONS");
    had_asan_ = asan != nullptr;
    asan_ = had_asan_ ? asan : "";
    setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1);
    setenv("ASAN_OPTIONS", (asan_ + (asan_.empty() ? "" : ":") + "quarantine_size_mb=0").c_str(),
           1);
  }
  ~UnbufferedMalloc() {
    unsetenv("MALLOC_MMAP_THRESHOLD_");
    if (had_asan_) {
      setenv("ASAN_OPTIONS", asan_.c_str(), 1);
    } else {
      unsetenv("ASAN_OPTIONS");
    }
  }

 private:
  bool had_asan_ = false;
  std::string asan_;
};

// --- Request framing ------------------------------------------------------------------------

// A byte stream to fenced: plain TCP or TLS (OpenSSL, certificate not checked: the test knows
// whom it talks to).
class Wire {
 public:
  Wire(std::uint16_t port, bool tls) : fd_(testing::ConnectLoopback(port)) {
    if (fd_ < 0 || !tls) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) ADD_FAILURE() << "TLS handshake with fenced failed";
  }
  ~Wire() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
  }
  // False once the peer closed or reset the connection.
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      int n = ssl_ != nullptr
                  ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                  : static_cast<int>(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL));
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

 private:
  int fd_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

enum class Mode { kPlain, kAuth, kTls };

struct FramingCase {
  const char* name;
  Mode mode;
  std::string after_header;  // what follows the header section, once
  std::string filler;        // then this, again and again
};

void PrintTo(const FramingCase& c, std::ostream* os) { *os << c.name; }

// The admin's bearer token and its SHA-256 (printf %s TOKEN | sha256sum).
constexpr const char* kAdminToken = "admin-t";
constexpr const char* kAdminDigest =
    "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c";

class FramingMemoryTest : public ::testing::TestWithParam<FramingCase> {
 protected:
  static void SetUpTestSuite() {
    // OpenSSL writes with write(2): a peer that closed must fail the write, not kill the test.
    signal(SIGPIPE, SIG_IGN);
    pki_ = new testing::Pki();
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  // GET /metrics as the admin, over the server's own scheme.
  std::string Metrics(std::uint16_t port, Mode mode) {
    std::string scheme = mode == Mode::kTls ? "https" : "http";
    auto r = RunCommand({"curl", "-sSk", "--noproxy", "*", "--max-time", "20", "-H",
                         std::string("Authorization: Bearer ") + kAdminToken,
                         scheme + "://127.0.0.1:" + std::to_string(port) + "/metrics"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  static testing::Pki* pki_;
  TempDir dir_;
};
testing::Pki* FramingMemoryTest::pki_ = nullptr;

TEST_P(FramingMemoryTest, FramingThatNeverEndsIsRefusedAndHoldsNoMemory) {
  const FramingCase& c = GetParam();
  std::vector<std::string> args;
  if (c.mode == Mode::kAuth) {
    std::ofstream(dir_.File("auth.json"))
        << R"({"principals": [{"name": "admin", "admin": true, "token_sha256": ")" << kAdminDigest
        << "\"}]}";
    args = {"--auth", dir_.File("auth.json")};
  } else if (c.mode == Mode::kTls) {
    args = {"--tls-cert", pki_->cert(), "--tls-key", pki_->key()};
  }
  UnbufferedMalloc unbuffered;
  FencedProcess fenced(dir_.File("f.db"), args);
  ASSERT_NE(fenced.port(), 0);
  ASSERT_NE(Metrics(fenced.port(), c.mode).find("fenced_connections_open"), std::string::npos);
  const std::size_t before = StatusKiB(fenced.pid(), "VmRSS");
  ResetPeak(fenced.pid());

  // No credentials: framing is bounded before authentication is checked.
  Wire wire(fenced.port(), c.mode == Mode::kTls);
  std::string filler;
  while (filler.size() < (1 << 20)) filler += c.filler;
  constexpr std::size_t kAttack = 200 << 20;
  std::size_t sent = 0;
  bool open = wire.Send(
      "PUT /v1/objects/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      c.after_header);
  while (open && sent < kAttack) {
    open = wire.Send(filler);
    if (open) sent += filler.size();
  }
  EXPECT_FALSE(open) << "fenced took all " << sent << " bytes of never-ending framing";
  const std::size_t peak = StatusKiB(fenced.pid(), "VmHWM");
  EXPECT_LT(peak, before + 32 * 1024) << "resident before: " << before << " KiB, peak during "
                                      << "the attack: " << peak << " KiB";
  std::string metrics;
  EXPECT_TRUE(WaitFor([&] {
    metrics = Metrics(fenced.port(), c.mode);
    return MetricValue(metrics, "fenced_writes_refused_total{reason=\"headers_too_large\"}") == 1;
  })) << metrics;
  EXPECT_EQ(MetricValue(metrics, "fenced_writes_accepted_total"), 0u) << metrics;
}

std::vector<FramingCase> FramingCases() {
  std::vector<FramingCase> out;
  for (auto [mode, mode_name] : {std::pair{Mode::kPlain, "Plain"}, std::pair{Mode::kAuth, "Auth"},
                                 std::pair{Mode::kTls, "Tls"}}) {
    (void)mode_name;
    out.push_back({"ChunkExtension", mode, "1;", "a"});
    out.push_back({"Trailer", mode, "1\r\nv\r\n0\r\n", "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n"});
    out.push_back({"WhitespaceAfterChunkSize", mode, "1", " "});
  }
  return out;
}

std::string FramingCaseName(const ::testing::TestParamInfo<FramingCase>& info) {
  const char* mode = info.param.mode == Mode::kPlain  ? "Plain"
                     : info.param.mode == Mode::kAuth ? "Auth"
                                                      : "Tls";
  return std::string(info.param.name) + mode;
}

INSTANTIATE_TEST_SUITE_P(Bounded, FramingMemoryTest, ::testing::ValuesIn(FramingCases()),
                         FramingCaseName);

// --- Answers nobody reads -------------------------------------------------------------------

// A connection with a tiny receive window that sends `requests` and never reads.
int SlowReader(std::uint16_t port, const std::string& requests) {
  int fd = testing::ConnectLoopback(port, 4096);
  if (fd < 0) return -1;
  if (send(fd, requests.data(), requests.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(requests.size())) {
    ADD_FAILURE() << "send failed";
  }
  return fd;
}

// True when the first bytes of an answer reached `fd` within `timeout` (nothing is read).
bool Answered(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

TEST(AnswerMemoryTest, UnreadListingsHoldNoMoreThanTheResponseBudget) {
  TempDir dir;
  std::unique_ptr<FencedProcess> fenced;
  {
    UnbufferedMalloc unbuffered;
    fenced = std::make_unique<FencedProcess>(
        dir.File("f.db"),
        std::vector<std::string>{"--max-response-memory", "32MiB", "--write-timeout", "120s",
                                 "--durability", "normal"});
  }
  ASSERT_NE(fenced->port(), 0);
  // 1,000 keys of 1 KiB under a lock of 1 KiB, of bytes that are not UTF-8: JSON carries them
  // percent-encoded, and a full listing is about 6 MiB, more than the kernel's socket buffers
  // take from fenced (a few MiB on loopback).
  RawConnection control(fenced->port());
  std::string ff;
  for (int i = 0; i < 1020; ++i) ff += "%FF";
  const std::string lock = "%FF%FF%FF%FF" + ff;
  for (int batch = 0; batch < 10; ++batch) {
    std::string body =
        R"({"lock":")" + lock + R"(","lock_encoding":"percent","token":1,"writes":[)";
    for (int i = 0; i < 100; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "%04d", batch * 100 + i);
      body += std::string(i == 0 ? "" : ",") + R"({"op":"put","key":")" + name + ff +
              R"(","key_encoding":"percent","value":"v"})";
    }
    body += "]}";
    control.Send(Request("POST", "/v1/batch", {}, body));
    auto r = control.Read();
    ASSERT_EQ(r.status, 200) << r.body;
  }
  control.Send(Request("GET", "/v1/objects?limit=1000"));
  auto full = control.Read();
  ASSERT_EQ(full.status, 200);
  ASSERT_GT(full.body.size(), 6'000'000u);

  const std::size_t before = StatusKiB(fenced->pid(), "VmRSS");
  std::vector<int> readers;
  for (int i = 0; i < 120; ++i) {
    readers.push_back(SlowReader(fenced->port(), Request("GET", "/v1/objects?limit=1000")));
    ASSERT_TRUE(Answered(readers.back(), 30s)) << "reader " << i << " got no answer";
  }
  const std::size_t held = StatusKiB(fenced->pid(), "VmRSS");
  EXPECT_LT(held, before + (32 + 16) * 1024)
      << "resident before: " << before << " KiB, with 120 unread listings: " << held << " KiB";
  // A normal client is still served: writes, reads, small listings. It connects now: on a
  // busy machine the readers take longer than fenced's idle timeout, which would close
  // `control`.
  RawConnection normal(fenced->port());
  normal.Send(Request("PUT", "/v1/objects/fresh", {{"Fencing-Token", "1"}}, "v"));
  EXPECT_EQ(normal.Read().status, 201);
  normal.Send(Request("GET", "/v1/objects/fresh"));
  EXPECT_EQ(normal.Read().body, "v");
  normal.Send(Request("GET", "/v1/objects?limit=10"));
  EXPECT_EQ(normal.Read().status, 200);
  normal.Send(Request("GET", "/metrics"));
  auto metrics = normal.Read().body;
  // 32 MiB holds 5 of them: the others were refused.
  EXPECT_GE(MetricValue(metrics, "fenced_answers_refused_total"), 100u) << metrics;
  for (int fd : readers) close(fd);
}

// "503 busy" says nothing was stored; a decided batch is answered with its decision. fenced
// reserves the answer before the store decides, so a batch whose receipts the budget cannot
// hold is refused before anything is written (it used to be committed, then answered 503).
TEST(AnswerMemoryTest, ABatchWhoseAnswerTheBudgetCannotHoldIsRefusedBeforeAnythingIsStored) {
  TempDir dir;
  FencedProcess fenced(dir.File("f.db"), {"--max-response-memory", "128KiB"});
  RawConnection c(fenced.port());
  // 1,000 puts of 100-byte keys: about 150 KB of receipts.
  auto batch = [](char tag) {
    std::string body = R"({"lock":"l","token":1,"writes":[)";
    for (int i = 0; i < 1000; ++i) {
      char name[8];
      std::snprintf(name, sizeof name, "%04d", i);
      body += std::string(i == 0 ? "" : ",") + R"({"op":"put","key":")" + tag + name +
              std::string(95, 'k') + R"(","value":"v"})";
    }
    return body + "]}";
  };
  c.Send(Request("POST", "/v1/batch", {}, batch('a')));
  auto r = c.Read();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("\"error\":\"busy\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("--max-response-memory 131072 bytes"), std::string::npos) << r.body;
  // Nothing was stored: no key, no decision in the history, no write counted.
  c.Send(Request("GET", "/v1/objects/a0000" + std::string(95, 'k')));
  EXPECT_EQ(c.Read().status, 404);
  c.Send(Request("GET", "/v1/history"));
  EXPECT_NE(c.Read().body.find("\"decisions\":[]"), std::string::npos);
  c.Send(Request("GET", "/metrics"));
  const std::string metrics = c.Read().body;
  EXPECT_EQ(MetricValue(metrics, "fenced_writes_accepted_total"), 0u) << metrics;
  EXPECT_EQ(MetricValue(metrics, "fenced_answers_refused_total"), 1u) << metrics;

  // With room for the answer, the same batch is stored and every write is answered.
  FencedProcess roomy(dir.File("g.db"), {"--max-response-memory", "1MiB"});
  RawConnection d(roomy.port());
  d.Send(Request("POST", "/v1/batch", {}, batch('b')));
  auto ok = d.Read();
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 300);
  EXPECT_GT(ok.body.size(), 128u << 10);
  EXPECT_NE(ok.body.find("\"key\":\"b0999"), std::string::npos);
}

TEST(AnswerMemoryTest, SlowReadersAreCutOffByTheWriteTimeoutAndTheirMemoryReturns) {
  TempDir dir;
  std::unique_ptr<FencedProcess> fenced;
  {
    UnbufferedMalloc unbuffered;
    fenced = std::make_unique<FencedProcess>(dir.File("f.db"),
                                             std::vector<std::string>{"--write-timeout", "1s"});
  }
  ASSERT_NE(fenced->port(), 0);
  RawConnection control(fenced->port());
  control.Send(
      Request("PUT", "/v1/objects/big", {{"Fencing-Token", "1"}}, std::string(1 << 20, 'b')));
  ASSERT_EQ(control.Read().status, 201);
  auto metric = [&](const std::string& name) {
    control.Send(Request("GET", "/metrics"));
    return MetricValue(control.Read().body, name);
  };
  std::size_t before = StatusKiB(fenced->pid(), "VmRSS");
  std::string gets;
  for (int i = 0; i < 16; ++i) gets += Request("GET", "/v1/objects/big");
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) slow.push_back(SlowReader(fenced->port(), gets));
  // Every slow connection is closed by the server once its response is a second late.
  EXPECT_TRUE(WaitFor([&] { return metric("fenced_write_timeouts_total") == 100; }, 60s))
      << metric("fenced_write_timeouts_total");
  EXPECT_TRUE(WaitFor([&] { return metric("fenced_connections_open") == 1; }));
  // Meanwhile, and after, an ordinary client is served.
  control.Send(Request("GET", "/healthz"));
  EXPECT_EQ(control.Read().status, 200);
  std::size_t after = StatusKiB(fenced->pid(), "VmRSS");
  EXPECT_LT(after, before + 32 * 1024) << "before " << before << " KiB, after " << after << " KiB";
  for (int fd : slow) close(fd);
}

}  // namespace
}  // namespace fencekit
