// Lock client cycle rates, for bench/lock_bench.sh (figures: docs/benchmarks.md).
//
//   lock_bench floor PORT SECONDS [--host H]      two bare EVALSHA round trips per cycle (hiredis):
//                                                 SET NX PX + INCR, then compare-and-delete
//   lock_bench etcd-floor PORT SECONDS [--host H] the same etcd cycle as fencekit's, as raw gateway
//                                                 calls on one connection (Beast, preformatted
//                                                 JSON): lease grant, txn, lease revoke
//   lock_bench cycle URI SECONDS [--lock NAME]    fencekit TryAcquire + Release, one client
//   lock_bench contend URI SECONDS [--lock NAME] [--start-at-ms EPOCH_MS]
//                                                 one of several processes contending for the same
//                                                 lock: Acquire(deadline) + Release; prints this
//                                                 process's acquisitions/s (the script sums them)
// Options: --warmup N (untimed cycles first, default 100; contend: 0), --ttl-ms N (default
// 10000). --start-at-ms: wall-clock time (ms since the epoch) at which to start, so that all
// contenders measure the same window.
//
// Output, one line per run: "MODE PER_SECOND key=value...", e.g.
//   cycle 5123 cycles=20492 seconds=4.000 p50_us=181 p99_us=402 failures=0
#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fencekit/lockclient/lock_client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode;
  std::string target;  // PORT for floor, URI otherwise
  double seconds = 4;
  std::string host = "127.0.0.1";
  std::string lock = "lock-bench";
  long warmup = -1;  // -1: the mode's default
  long ttl_ms = 10'000;
  long long start_at_ms = 0;
};

int Usage() {
  std::fprintf(stderr,
               "usage: lock_bench floor PORT SECONDS [--host H]\n"
               "       lock_bench etcd-floor PORT SECONDS [--host H]\n"
               "       lock_bench cycle URI SECONDS [--lock NAME]\n"
               "       lock_bench contend URI SECONDS [--lock NAME] [--start-at-ms EPOCH_MS]\n"
               "options: --warmup N, --ttl-ms N\n");
  return 2;
}

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 4) return false;
  a->mode = argv[1];
  a->target = argv[2];
  a->seconds = std::atof(argv[3]);
  if (a->seconds <= 0) return false;
  for (int i = 4; i < argc; ++i) {
    std::string opt = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (opt == "--host") {
      a->host = v;
    } else if (opt == "--lock") {
      a->lock = v;
    } else if (opt == "--warmup") {
      a->warmup = std::atol(v);
    } else if (opt == "--ttl-ms") {
      a->ttl_ms = std::atol(v);
    } else if (opt == "--start-at-ms") {
      a->start_at_ms = std::atoll(v);
    } else {
      return false;
    }
  }
  return a->mode == "floor" || a->mode == "etcd-floor" || a->mode == "cycle" ||
         a->mode == "contend";
}

// Per-cycle latencies, in microseconds.
class Recorder {
 public:
  Recorder() { us_.reserve(1 << 16); }
  void Add(Clock::duration d) {
    us_.push_back(std::chrono::duration<float, std::micro>(d).count());
  }
  void Print(const char* mode, double seconds, long failures) {
    long n = static_cast<long>(us_.size());
    std::sort(us_.begin(), us_.end());
    auto pct = [&](double p) {
      return n == 0 ? 0.0 : us_[std::min<long>(n - 1, static_cast<long>(p * n))];
    };
    std::printf("%s %.0f cycles=%ld seconds=%.3f p50_us=%.0f p99_us=%.0f failures=%ld\n", mode,
                n / seconds, n, seconds, pct(0.50), pct(0.99), failures);
    std::fflush(stdout);
  }

 private:
  std::vector<float> us_;
};

// Runs `one` (a cycle; false when it failed) for `seconds` or until `broken()`, and prints the
// rate and latencies.
template <typename One, typename Broken>
void MeasureCycles(const char* mode, double seconds, One one, Broken broken) {
  long failures = 0;
  Recorder rec;
  auto start = Clock::now();
  auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (auto t = start; t < end;) {
    if (!one()) ++failures;
    auto now = Clock::now();
    rec.Add(now - t);
    t = now;
    if (broken()) break;
  }
  rec.Print(mode, std::chrono::duration<double>(Clock::now() - start).count(), failures);
}

void WaitForStart(long long start_at_ms) {
  if (start_at_ms <= 0) return;
  std::this_thread::sleep_until(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(start_at_ms)));
}

// ---------------------------------------------------------------------------------------------
// The floor: the least a Redis lock with a token can do per cycle, two round trips, nothing else
// (owner ids are a counter of the same length as fencekit's 128-bit hex owners).

constexpr const char* kFloorAcquire =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "return redis.call('incr', KEYS[2]) end return 0";
constexpr const char* kFloorRelease =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

int Floor(const Args& a) {
  int port = std::atoi(a.target.c_str());
  redisContext* c = redisConnect(a.host.c_str(), port);  // hiredis sets TCP_NODELAY
  if (c == nullptr || c->err) {
    std::fprintf(stderr, "floor: cannot connect to %s:%d: %s\n", a.host.c_str(), port,
                 c ? c->errstr : "out of memory");
    return 1;
  }
  auto load = [&](const char* script) -> std::string {
    Reply r = Command(c, {"SCRIPT", "LOAD", script});
    if (!r || r->type != REDIS_REPLY_STRING) return {};
    return std::string(r->str, r->len);
  };
  std::string acquire_sha = load(kFloorAcquire), release_sha = load(kFloorRelease);
  if (acquire_sha.empty() || release_sha.empty()) {
    std::fprintf(stderr, "floor: SCRIPT LOAD failed\n");
    return 1;
  }
  const std::string lock_key = "floor:{" + a.lock + "}:lock";
  const std::string token_key = "floor:{" + a.lock + "}:token";
  const std::string ttl = std::to_string(a.ttl_ms);
  // Argument vectors built once; only the owner changes from cycle to cycle.
  std::vector<const char*> acq = {"EVALSHA",        acquire_sha.c_str(), "2",
                                  lock_key.c_str(), token_key.c_str(),   nullptr,
                                  ttl.c_str()};
  std::vector<const char*> rel = {"EVALSHA", release_sha.c_str(), "1", lock_key.c_str(), nullptr};
  std::vector<std::size_t> acq_len, rel_len;
  for (auto* s : acq) acq_len.push_back(s ? std::strlen(s) : 0);
  for (auto* s : rel) rel_len.push_back(s ? std::strlen(s) : 0);
  char owner[33];
  unsigned long long seq = static_cast<unsigned long long>(Clock::now().time_since_epoch().count());

  auto one = [&]() -> bool {
    std::snprintf(owner, sizeof owner, "%032llx", ++seq);
    acq[5] = owner;
    acq_len[5] = 32;
    rel[4] = owner;
    rel_len[4] = 32;
    Reply r1(static_cast<redisReply*>(redisCommandArgv(c, 7, acq.data(), acq_len.data())));
    bool ok = r1 && r1->type == REDIS_REPLY_INTEGER && r1->integer > 0;
    Reply r2(static_cast<redisReply*>(redisCommandArgv(c, 5, rel.data(), rel_len.data())));
    return ok && r2 && r2->type == REDIS_REPLY_INTEGER && r2->integer == 1;
  };
  for (long i = 0; i < (a.warmup < 0 ? 100 : a.warmup); ++i) one();
  if (c->err) {
    std::fprintf(stderr, "floor: %s\n", c->errstr);
    return 1;
  }

  MeasureCycles("floor", a.seconds, one, [&] { return c->err != 0; });
  redisFree(c);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The etcd floor: fencekit's etcd cycle (lease grant; txn that joins the line, records the last
// token and reads the first key; lease revoke) as bare gateway calls on one keep-alive
// connection, with the JSON preformatted and the replies only searched for what decides success.

std::string Base64(const std::string& in) {
  using namespace boost::archive::iterators;
  using It = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
  std::string out(It(in.begin()), It(in.end()));
  out.append((3 - in.size() % 3) % 3, '=');
  return out;
}

int EtcdFloor(const Args& a) {
  namespace http = boost::beast::http;
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context ioc;
  tcp::socket socket(ioc);
  boost::system::error_code ec;
  boost::asio::connect(socket, tcp::resolver(ioc).resolve(a.host, a.target, ec), ec);
  if (ec) {
    std::fprintf(stderr, "etcd-floor: cannot connect to %s:%s: %s\n", a.host.c_str(),
                 a.target.c_str(), ec.message().c_str());
    return 1;
  }
  socket.set_option(tcp::no_delay(true));
  boost::beast::flat_buffer buffer;
  const std::string host = a.host + ":" + a.target;
  auto post = [&](const char* target, std::string body) -> std::string {
    http::request<http::string_body> req(http::verb::post, target, 11);
    req.set(http::field::host, host);
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(socket, req, ec);
    if (ec) return {};
    http::response<http::string_body> res;
    http::read(socket, buffer, res, ec);
    if (ec || res.result_int() != 200) return {};
    return std::move(res.body());
  };
  const std::string name = "floor-" + a.lock;
  const std::string prefix = "fencekit/lock/" + std::to_string(name.size()) + ":" + name + "/";
  std::string prefix_end = prefix;
  prefix_end.back() = '0';
  const std::string range_first = "{\"request_range\":{\"key\":\"" + Base64(prefix) +
                                  "\",\"range_end\":\"" + Base64(prefix_end) +
                                  "\",\"sort_target\":\"CREATE\",\"sort_order\":\"ASCEND\","
                                  "\"limit\":\"1\"}}";
  const std::string last_key = Base64("fencekit/last/" + std::to_string(name.size()) + ":" + name);
  const std::string grant =
      "{\"TTL\":\"" + std::to_string(std::max(1L, (a.ttl_ms + 999) / 1000)) + "\"}";
  char owner[33];
  unsigned long long seq = static_cast<unsigned long long>(Clock::now().time_since_epoch().count());
  auto one = [&]() -> bool {
    std::string g = post("/v3/lease/grant", grant);
    auto at = g.find("\"ID\":\"");
    if (at == std::string::npos) return false;
    std::string id = g.substr(at + 6, g.find('"', at + 6) - at - 6);
    std::snprintf(owner, sizeof owner, "%032llx", ++seq);
    std::string key = Base64(prefix + owner), value = Base64(owner);
    std::string txn = "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"" + key +
                      "\",\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"" +
                      key + "\",\"value\":\"" + value + "\",\"lease\":\"" + id +
                      "\"}},{\"request_put\":{\"key\":\"" + last_key + "\",\"value\":\"" + value +
                      "\"}}," + range_first + "],\"failure\":[]}";
    std::string t = post("/v3/kv/txn", txn);
    bool ok = t.find("\"succeeded\":true") != std::string::npos &&
              t.find(key) != std::string::npos;  // first in line
    std::string r = post("/v3/lease/revoke", "{\"ID\":\"" + id + "\"}");
    return ok && !r.empty();
  };
  for (long i = 0; i < (a.warmup < 0 ? 100 : a.warmup); ++i) one();
  if (ec) {
    std::fprintf(stderr, "etcd-floor: %s\n", ec.message().c_str());
    return 1;
  }
  MeasureCycles("etcd-floor", a.seconds, one, [&] { return bool(ec); });
  return 0;
}

// ---------------------------------------------------------------------------------------------
// fencekit's LockClient.

int Cycle(const Args& a, bool contend) {
  auto client = fencekit::LockClient::Open(a.target);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  fencekit::LockClient& lc = **client;
  const std::chrono::milliseconds ttl(a.ttl_ms);
  long failures = 0;
  std::string first_error;
  auto fail = [&](const fencekit::Status& s) {
    ++failures;
    if (first_error.empty()) first_error = s.ToString();
  };

  long warmup = a.warmup < 0 ? (contend ? 0 : 100) : a.warmup;
  for (long i = 0; i < warmup; ++i) {
    auto lease = lc.TryAcquire(a.lock, ttl);
    if (lease.ok()) (void)lc.Release(*lease);
  }
  WaitForStart(a.start_at_ms);

  Recorder rec;
  auto start = Clock::now();
  auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  for (auto t = start; t < end;) {
    auto lease = contend ? lc.Acquire(a.lock, std::min(end, t + std::chrono::seconds(10)), ttl)
                         : lc.TryAcquire(a.lock, ttl);
    if (!lease.ok()) {
      // A contender still waiting when the window closes is not a failure.
      if (!(contend && lease.status().code() == fencekit::StatusCode::kTimeout)) {
        fail(lease.status());
      }
      t = Clock::now();
      continue;
    }
    if (auto s = lc.Release(*lease); !s.ok()) fail(s);
    auto now = Clock::now();
    rec.Add(now - t);
    t = now;
  }
  rec.Print(contend ? "contend" : "cycle",
            std::chrono::duration<double>(Clock::now() - start).count(), failures);
  if (!first_error.empty()) std::fprintf(stderr, "first failure: %s\n", first_error.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) return Usage();
  if (a.mode == "floor") return Floor(a);
  if (a.mode == "etcd-floor") return EtcdFloor(a);
  return Cycle(a, a.mode == "contend");
}
