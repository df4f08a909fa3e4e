// Lock client cycle rates, for bench/lock_bench.sh (figures: docs/benchmarks.md).
//
//   lock_bench floor PORT SECONDS [--host H]      two bare EVALSHA round trips per cycle (hiredis):
//                                                 SET NX PX + INCR, then compare-and-delete
//   lock_bench etcd-floor PORT SECONDS [--host H] the same etcd cycle as fencekit's, as raw gateway
//                                                 calls on one connection (Beast, preformatted
//                                                 JSON): lease grant, txn, lease revoke
//   lock_bench redis-paired PORT SECONDS [--host H]  floor and fencekit's cycle (redis://H:PORT)
//                                                 in alternate blocks of 20 cycles; two lines
//   lock_bench etcd-paired PORT SECONDS [--host H] the same with etcd-floor and etcd://H:PORT
//   lock_bench zk-floor PORT SECONDS [--host H]   the lock recipe as raw ZooKeeper C client calls
//                                                 on one session: create an ephemeral sequential
//                                                 znode, list the line, delete the znode
//   lock_bench zk-paired PORT SECONDS [--host H]  the same with zk-floor and zk://H:PORT
//   lock_bench cycle URI SECONDS [--lock NAME]    fencekit TryAcquire + Release, one client
//   lock_bench contend URI SECONDS [--lock NAME] [--start-at-ms EPOCH_MS]
//                                                 one of several processes contending for the same
//                                                 lock: Acquire(wait) + Release; prints this
//                                                 process's acquisitions/s (the script sums them)
// Options: --warmup N (untimed cycles first, default 100; contend: 0), --ttl-ms N (default
// 10000). --start-at-ms: wall-clock time (ms since the epoch) at which to start, so that all
// contenders measure the same window.
//
// Output, one line per run: "MODE PER_SECOND key=value...", e.g.
//   cycle 5123 cycles=20492 seconds=4.000 p50_us=181 p99_us=402 failures=0
#include <hiredis/hiredis.h>
// The ZooKeeper C client's synchronous calls are declared for its multithreaded library only.
#define THREADED
#include <zookeeper/zookeeper.h>

#include <algorithm>
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

#include "fencekit/common/text.h"
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
               "       lock_bench redis-paired PORT SECONDS [--host H] [--lock NAME]\n"
               "       lock_bench etcd-paired PORT SECONDS [--host H] [--lock NAME]\n"
               "       lock_bench zk-floor PORT SECONDS [--host H]\n"
               "       lock_bench zk-paired PORT SECONDS [--host H] [--lock NAME]\n"
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
  return a->mode == "floor" || a->mode == "etcd-floor" || a->mode == "redis-paired" ||
         a->mode == "etcd-paired" || a->mode == "zk-floor" || a->mode == "zk-paired" ||
         a->mode == "cycle" || a->mode == "contend";
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

// The end of the measured window. With --start-at-ms, the window is the same wall-clock span
// for every process, so that one started late (a loaded machine) does not run alone at the end.
Clock::time_point WindowEnd(const Args& a, Clock::time_point start) {
  auto length =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  if (a.start_at_ms <= 0) return start + length;
  auto since_start =
      std::chrono::system_clock::now() -
      std::chrono::system_clock::time_point(std::chrono::milliseconds(a.start_at_ms));
  return start + length - std::chrono::duration_cast<Clock::duration>(since_start);
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

// One connection's worth of floor cycles; error() is empty while the connection is usable.
class RedisFloorCycle {
 public:
  explicit RedisFloorCycle(const Args& a)
      : c_(redisConnect(a.host.c_str(), std::atoi(a.target.c_str()))),  // sets TCP_NODELAY
        seq_(static_cast<unsigned long long>(Clock::now().time_since_epoch().count())) {
    if (c_ == nullptr || c_->err) return;
    acquire_sha_ = Load(kFloorAcquire);
    release_sha_ = Load(kFloorRelease);
    if (acquire_sha_.empty() || release_sha_.empty()) {
      load_failed_ = true;
      return;
    }
    lock_key_ = "floor:{" + a.lock + "}:lock";
    token_key_ = "floor:{" + a.lock + "}:token";
    ttl_ = std::to_string(a.ttl_ms);
    // Argument vectors built once; only the owner changes from cycle to cycle.
    acq_ = {"EVALSHA", acquire_sha_.c_str(), "2", lock_key_.c_str(), token_key_.c_str(),
            owner_,    ttl_.c_str()};
    rel_ = {"EVALSHA", release_sha_.c_str(), "1", lock_key_.c_str(), owner_};
    for (auto* s : acq_) acq_len_.push_back(std::strlen(s));
    for (auto* s : rel_) rel_len_.push_back(std::strlen(s));
  }
  ~RedisFloorCycle() {
    if (c_ != nullptr) redisFree(c_);
  }
  RedisFloorCycle(const RedisFloorCycle&) = delete;
  RedisFloorCycle& operator=(const RedisFloorCycle&) = delete;

  std::string error() const {
    if (c_ == nullptr) return "out of memory";
    if (c_->err) return c_->errstr;
    return load_failed_ ? "SCRIPT LOAD failed" : "";
  }

  bool One() {
    std::snprintf(owner_, sizeof owner_, "%032llx", ++seq_);
    Reply r1(static_cast<redisReply*>(redisCommandArgv(c_, 7, acq_.data(), acq_len_.data())));
    bool ok = r1 && r1->type == REDIS_REPLY_INTEGER && r1->integer > 0;
    Reply r2(static_cast<redisReply*>(redisCommandArgv(c_, 5, rel_.data(), rel_len_.data())));
    return ok && r2 && r2->type == REDIS_REPLY_INTEGER && r2->integer == 1;
  }

 private:
  std::string Load(const char* script) {
    Reply r = Command(c_, {"SCRIPT", "LOAD", script});
    if (!r || r->type != REDIS_REPLY_STRING) return {};
    return std::string(r->str, r->len);
  }

  redisContext* c_;
  bool load_failed_ = false;
  std::string acquire_sha_, release_sha_, lock_key_, token_key_, ttl_;
  char owner_[33] = "00000000000000000000000000000000";
  unsigned long long seq_;
  std::vector<const char*> acq_, rel_;
  std::vector<std::size_t> acq_len_, rel_len_;
};

// ---------------------------------------------------------------------------------------------
// The etcd floor: fencekit's etcd cycle (lease grant; txn that joins the line, records the last
// token and reads the first key; lease revoke) as bare gateway calls on one keep-alive
// connection, with the JSON preformatted and the replies only searched for what decides success.

using fencekit::Base64Encode;

// One connection's worth of raw etcd cycles; error() is empty while the connection is usable.
class EtcdFloorCycle {
 public:
  explicit EtcdFloorCycle(const Args& a)
      : socket_(ioc_),
        host_(a.host + ":" + a.target),
        seq_(static_cast<unsigned long long>(Clock::now().time_since_epoch().count())) {
    using tcp = boost::asio::ip::tcp;
    boost::asio::connect(socket_, tcp::resolver(ioc_).resolve(a.host, a.target, ec_), ec_);
    if (ec_) return;
    socket_.set_option(tcp::no_delay(true));
    const std::string name = "floor-" + a.lock;
    prefix_ = "fencekit/lock/" + std::to_string(name.size()) + ":" + name + "/";
    std::string prefix_end = prefix_;
    prefix_end.back() = '0';
    range_first_ = "{\"request_range\":{\"key\":\"" + Base64Encode(prefix_) +
                   "\",\"range_end\":\"" + Base64Encode(prefix_end) +
                   "\",\"sort_target\":\"CREATE\",\"sort_order\":\"ASCEND\",\"limit\":\"1\"}}";
    last_key_ = Base64Encode("fencekit/last/" + std::to_string(name.size()) + ":" + name);
    grant_ = "{\"TTL\":\"" + std::to_string(std::max(1L, (a.ttl_ms + 999) / 1000)) + "\"}";
  }
  std::string error() const { return ec_ ? ec_.message() : std::string(); }

  bool One() {
    std::string g = Post("/v3/lease/grant", grant_);
    auto at = g.find("\"ID\":\"");
    if (at == std::string::npos) return false;
    std::string id = g.substr(at + 6, g.find('"', at + 6) - at - 6);
    char owner[33];
    std::snprintf(owner, sizeof owner, "%032llx", ++seq_);
    std::string key = Base64Encode(prefix_ + owner), value = Base64Encode(owner);
    std::string txn = "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"" + key +
                      "\",\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"" +
                      key + "\",\"value\":\"" + value + "\",\"lease\":\"" + id +
                      "\"}},{\"request_put\":{\"key\":\"" + last_key_ + "\",\"value\":\"" + value +
                      "\"}}," + range_first_ + "],\"failure\":[]}";
    std::string t = Post("/v3/kv/txn", txn);
    bool ok = t.find("\"succeeded\":true") != std::string::npos &&
              t.find(key) != std::string::npos;  // first in line
    std::string r = Post("/v3/lease/revoke", "{\"ID\":\"" + id + "\"}");
    return ok && !r.empty();
  }

 private:
  std::string Post(const char* target, std::string body) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req(http::verb::post, target, 11);
    req.set(http::field::host, host_);
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(socket_, req, ec_);
    if (ec_) return {};
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res, ec_);
    if (ec_ || res.result_int() != 200) return {};
    return std::move(res.body());
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  boost::system::error_code ec_;
  std::string host_, prefix_, range_first_, last_key_, grant_;
  unsigned long long seq_;
};

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
  auto end = WindowEnd(a, start);
  for (auto t = start; t < end;) {
    const auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - t), std::chrono::seconds(10));
    auto lease = contend ? lc.Acquire(a.lock, wait, ttl)
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

// False, with the reason on stderr, when the floor's connection could not be set up.
template <typename FloorCycle>
bool Usable(const Args& a, const char* mode, const FloorCycle& floor) {
  if (floor.error().empty()) return true;
  std::fprintf(stderr, "%s: cannot use %s:%s: %s\n", mode, a.host.c_str(), a.target.c_str(),
               floor.error().c_str());
  return false;
}

// The ZooKeeper floor: the lock recipe's calls with the C client's synchronous API on one session
// (a 10s session timeout): create the contender's ephemeral sequential znode, list the lock's
// line, delete the znode; its folder made once, beforehand.
class ZookeeperFloorCycle {
 public:
  explicit ZookeeperFloorCycle(const Args& a) : dir_("/fencekit-floor/" + a.lock) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    const std::string hosts = a.host + ":" + a.target;
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 10'000, nullptr, nullptr, 0);
    if (zh_ == nullptr) {
      error_ = "zookeeper_init failed";
      return;
    }
    for (const std::string& path : {std::string("/fencekit-floor"), dir_}) {
      int rc = zoo_create(zh_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                          nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) error_ = zerror(rc);
    }
    prefix_ = dir_ + "/floor-lock-";
  }
  ~ZookeeperFloorCycle() {
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  ZookeeperFloorCycle(const ZookeeperFloorCycle&) = delete;
  ZookeeperFloorCycle& operator=(const ZookeeperFloorCycle&) = delete;

  std::string error() const { return error_; }

  bool One() {
    char made[512];
    Stat stat{};
    int rc = zoo_create2(zh_, prefix_.c_str(), "10000", 5, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made, &stat);
    if (rc != ZOK) return false;
    String_vector line{};
    rc = zoo_get_children(zh_, dir_.c_str(), 0, &line);
    bool first = rc == ZOK && line.count == 1;
    if (rc == ZOK) deallocate_String_vector(&line);
    return zoo_delete(zh_, made, -1) == ZOK && first && stat.czxid > 0;
  }

 private:
  zhandle_t* zh_ = nullptr;
  std::string dir_, prefix_, error_;
};

// A floor alone (modes floor and etcd-floor), for looking at one side without the other.
template <typename FloorCycle>
int Alone(const Args& a, const char* mode, FloorCycle& floor) {
  if (!Usable(a, mode, floor)) return 1;
  auto broken = [&] { return !floor.error().empty(); };
  for (long i = 0; i < (a.warmup < 0 ? 100 : a.warmup); ++i) floor.One();
  MeasureCycles(
      mode, a.seconds, [&] { return floor.One(); }, broken);
  return broken() ? 1 : 0;
}

// A floor and fencekit's cycle on the same server, taken turn about in blocks of 20 cycles, so
// that both see the same server state (etcd's history grows, fsync times drift) and the same
// neighbours; each side's rate is its cycles over the time spent in its own blocks. Prints the
// floor's line, then fencekit's ("cycle").
template <typename FloorCycle>
int Paired(const Args& a, const char* floor_mode, FloorCycle& floor, const std::string& uri) {
  if (!Usable(a, floor_mode, floor)) return 1;
  auto broken = [&] { return !floor.error().empty(); };
  auto client = fencekit::LockClient::Open(uri);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  fencekit::LockClient& lc = **client;
  const std::chrono::milliseconds ttl(a.ttl_ms);
  long failures[2] = {0, 0};
  std::string first_error;
  auto fencekit_one = [&] {
    auto lease = lc.TryAcquire(a.lock, ttl);
    fencekit::Status s = lease.ok() ? lc.Release(*lease) : lease.status();
    if (!s.ok() && first_error.empty()) first_error = s.ToString();
    return s.ok();
  };
  for (long i = 0; i < (a.warmup < 0 ? 100 : a.warmup); ++i) {
    floor.One();
    fencekit_one();
  }
  Recorder rec[2];
  Clock::duration spent[2] = {};
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(a.seconds));
  for (int side = 0; Clock::now() < end && !broken(); side = 1 - side) {
    auto t = Clock::now();
    for (int i = 0; i < 20; ++i) {
      if (!(side == 0 ? floor.One() : fencekit_one())) ++failures[side];
      auto now = Clock::now();
      rec[side].Add(now - t);
      spent[side] += now - t;
      t = now;
    }
  }
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  rec[0].Print(floor_mode, secs(spent[0]), failures[0]);
  rec[1].Print("cycle", secs(spent[1]), failures[1]);
  if (broken()) std::fprintf(stderr, "%s: %s\n", floor_mode, floor.error().c_str());
  if (!first_error.empty()) std::fprintf(stderr, "first failure: %s\n", first_error.c_str());
  return broken() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) return Usage();
  if (a.mode == "floor") {
    RedisFloorCycle floor(a);
    return Alone(a, "floor", floor);
  }
  if (a.mode == "etcd-floor") {
    EtcdFloorCycle floor(a);
    return Alone(a, "etcd-floor", floor);
  }
  if (a.mode == "zk-floor") {
    ZookeeperFloorCycle floor(a);
    return Alone(a, "zk-floor", floor);
  }
  if (a.mode == "zk-paired") {
    ZookeeperFloorCycle floor(a);
    return Paired(a, "zk-floor", floor, "zk://" + a.host + ":" + a.target);
  }
  if (a.mode == "redis-paired") {
    RedisFloorCycle floor(a);
    return Paired(a, "floor", floor, "redis://" + a.host + ":" + a.target);
  }
  if (a.mode == "etcd-paired") {
    EtcdFloorCycle floor(a);
    return Paired(a, "etcd-floor", floor, "etcd://" + a.host + ":" + a.target);
  }
  return Cycle(a, a.mode == "contend");
}
