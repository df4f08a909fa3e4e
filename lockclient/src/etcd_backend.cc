// etcd backend: leases from etcd's v3 JSON gateway, over HTTP with Beast and Boost.JSON (no
// gRPC dependency).
//
// A lock is a line of keys under fencekit/lock/<length>:<name>/, one per contender, each
// attached to that contender's etcd lease. The key with the lowest create_revision holds the
// lock, and that revision is the fencing token: etcd's revision is agreed by Raft and never
// goes backwards, across leader changes too. A waiter watches the key just before its own and
// is woken when it is deleted (released, or its lease expired): first come, first served, and
// one wake-up per release.
//
// Gateway quirks (etcd 3.4): int64 fields are JSON strings, keys and values are base64, default
// values are omitted (a failed txn has no "succeeded", a PUT event has no "type", an expired
// lease's keep-alive has no "TTL"), and streaming calls answer one JSON object per line.
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "backend.h"
#include "fencekit/common/text.h"

namespace fencekit {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// gRPC status codes that etcd puts in the gateway's error replies.
constexpr std::int64_t kGrpcInvalidArgument = 3;
constexpr std::int64_t kGrpcDeadlineExceeded = 4;
constexpr std::int64_t kGrpcNotFound = 5;
constexpr std::int64_t kGrpcUnavailable = 14;

// An int64 field, sent by the gateway as a string (or, leniently, as a number); 0 if absent.
std::int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (!v->is_string()) return 0;
  std::int64_t out = 0;
  const json::string& s = v->as_string();
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out;
}

const json::object* Object(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_object() ? &v->as_object() : nullptr;
}

std::string String(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// The first kv of a range response (or of a txn's response_range entry), if any.
const json::object* FirstKv(const json::object* range) {
  if (range == nullptr) return nullptr;
  const json::value* kvs = range->if_contains("kvs");
  if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty()) return nullptr;
  const json::value& kv = kvs->as_array()[0];
  return kv.is_object() ? &kv.as_object() : nullptr;
}

// The n-th response of a txn reply, unwrapped ("response_range", "response_put", ...).
const json::object* TxnResponse(const json::object& reply, std::size_t n, std::string_view kind) {
  const json::value* rs = reply.if_contains("responses");
  if (rs == nullptr || !rs->is_array() || rs->as_array().size() <= n) return nullptr;
  const json::value& r = rs->as_array()[n];
  return r.is_object() ? Object(r.as_object(), kind) : nullptr;
}

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

struct Endpoint {
  std::string host, port;
  std::string Name() const { return host + ":" + port; }
};

struct Reply {
  int status = 0;
  std::string body;
};

// One HTTP/1.1 keep-alive connection to one gateway endpoint, with its own io_context so that
// every call can run synchronously with a deadline. Thread safety: not thread-safe; the pool
// hands it to one caller at a time.
class GatewayConn {
 public:
  GatewayConn(Endpoint endpoint, std::size_t index)
      : endpoint_(std::move(endpoint)), index_(index) {}
  GatewayConn(const GatewayConn&) = delete;
  GatewayConn& operator=(const GatewayConn&) = delete;
  ~GatewayConn() { Close(); }

  const Endpoint& endpoint() const { return endpoint_; }
  std::size_t index() const { return index_; }
  bool used() const { return used_; }

  Status Connect(milliseconds timeout) {
    tcp::resolver resolver(ioc_);
    boost::system::error_code ec;
    auto endpoints = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) return Status::Unavailable("cannot resolve " + endpoint_.Name() + ": " + ec.message());
    stream_.emplace(ioc_);
    bool done = false;
    net::async_connect(*stream_, endpoints, [&](boost::system::error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    if (!Run(done, timeout)) {
      return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": no answer within " +
                                 FormatMs(timeout));
    }
    if (ec) {
      Close();
      return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": " + ec.message());
    }
    stream_->set_option(tcp::no_delay(true), ec);
    return Status::Ok();
  }

  // POSTs a JSON body and reads the whole reply. kUnavailable on a transport error or timeout;
  // the connection is then closed.
  Result<Reply> Post(std::string_view target, const std::string& body, milliseconds timeout) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    Status s = Exchange(target, body, timeout,
                        [&](auto done) { http::async_read(*stream_, buffer_, parser, done); });
    if (!s.ok()) return s;
    Reply out{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
    if (!parser.get().keep_alive()) Close();
    return out;
  }

  // Starts a streaming POST (a watch) and reads its headers. Messages then come one per line.
  Status OpenStream(std::string_view target, const std::string& body, milliseconds timeout) {
    stream_parser_.emplace();
    stream_parser_->body_limit(boost::none);
    Status s = Exchange(target, body, timeout, [&](auto done) {
      http::async_read_header(*stream_, buffer_, *stream_parser_, done);
    });
    if (!s.ok()) return s;
    if (int status = static_cast<int>(stream_parser_->get().result_int()); status != 200) {
      Close();
      return Status::Unavailable(endpoint_.Name() + " refused a watch: HTTP " +
                                 std::to_string(status));
    }
    return Status::Ok();
  }

  // The stream's next message, or nullopt when none arrived within `wait`. A read left pending
  // by a nullopt carries on in the next call.
  Result<std::optional<std::string>> NextMessage(milliseconds wait) {
    auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      std::string& body = stream_parser_->get().body();
      if (auto nl = body.find('\n'); nl != std::string::npos) {
        std::string line = body.substr(0, nl);
        body.erase(0, nl + 1);
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        return std::optional<std::string>(std::move(line));
      }
      if (stream_parser_->is_done()) {
        return Status::Unavailable(endpoint_.Name() + " ended the watch stream");
      }
      if (!read_pending_) {
        read_pending_ = true;
        http::async_read_some(*stream_, buffer_, *stream_parser_,
                              [this](boost::system::error_code e, std::size_t) {
                                read_pending_ = false;
                                read_ec_ = e;
                              });
      }
      auto now = std::chrono::steady_clock::now();
      if (now >= until) return std::optional<std::string>();
      ioc_.restart();
      ioc_.run_for(until - now);
      if (read_pending_) return std::optional<std::string>();
      if (read_ec_) {
        std::string why = read_ec_.message();
        Close();
        return Status::Unavailable(endpoint_.Name() + " broke the watch stream: " + why);
      }
    }
  }

 private:
  // Writes the request, then starts `read(handler)`, and runs both to completion or `timeout`.
  template <typename StartRead>
  Status Exchange(std::string_view target, const std::string& body, milliseconds timeout,
                  StartRead read) {
    used_ = true;
    auto req = Request(target, body);
    boost::system::error_code ec;
    bool done = false;
    auto finish = [&](boost::system::error_code e, std::size_t) {
      ec = e;
      done = true;
    };
    http::async_write(*stream_, req, [&](boost::system::error_code e, std::size_t n) {
      if (e) return finish(e, n);
      read(finish);
    });
    if (!Run(done, timeout)) {
      return Status::Unavailable(endpoint_.Name() + ": no reply within " + FormatMs(timeout));
    }
    if (ec) {
      Close();
      return Status::Unavailable(endpoint_.Name() + ": " + ec.message());
    }
    return Status::Ok();
  }

  http::request<http::string_body> Request(std::string_view target, const std::string& body) {
    http::request<http::string_body> req(http::verb::post, target, 11);
    req.set(http::field::host, endpoint_.Name());
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }

  // Runs queued operations until `done` or `timeout` (no timer objects: the wait itself is
  // bounded). False on a timeout, after closing the connection, which completes every pending
  // handler now: none is left that refers to the caller's frame.
  bool Run(bool& done, milliseconds timeout) {
    ioc_.restart();
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!done && std::chrono::steady_clock::now() < until) {
      if (ioc_.run_one_until(until) == 0 && ioc_.stopped()) break;
    }
    if (done) return true;
    Close();
    return false;
  }

  void Close() {
    if (stream_) {
      boost::system::error_code ec;
      stream_->shutdown(tcp::socket::shutdown_both, ec);
      stream_->close(ec);
      ioc_.restart();
      ioc_.run();  // completes cancelled handlers now, while what they refer to is alive
      stream_.reset();
    }
    stream_parser_.reset();
    read_pending_ = false;
    buffer_.clear();
    closed_ = true;
  }

 public:
  bool closed() const { return closed_; }

 private:
  Endpoint endpoint_;
  std::size_t index_;
  net::io_context ioc_{1};  // one thread at a time: lets Asio skip its locking
  std::optional<tcp::socket> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> stream_parser_;
  bool read_pending_ = false;
  boost::system::error_code read_ec_;
  bool used_ = false;
  bool closed_ = false;
};

// Connections to the gateway endpoints, with failover. Thread safety: safe for concurrent use.
class Gateway {
 public:
  Gateway(std::vector<Endpoint> endpoints, const LockOptions& options)
      : endpoints_(std::move(endpoints)), options_(options) {}

  // POSTs `body` to the endpoint that answered last, else the next one. On a transport error,
  // or when etcd answers "unavailable" (no leader, leader changed), tries the next endpoint.
  // *sends counts the attempts that may have reached etcd (a retried revoke may find the
  // lease already gone). Returns the reply object, or the error etcd answered as a Status:
  // kNotFound (e.g. no such lease), kInvalidArgument, kUnavailable.
  Result<json::object> Call(std::string_view target, const json::object& body, int* sends) {
    std::string text = json::serialize(body);
    std::string errors;
    int tries = 0;
    // Every endpoint twice; and while members answer "unavailable" (an election after the
    // leader died takes about one election timeout), keep asking for up to op_timeout.
    const int max_tries = 2 * static_cast<int>(endpoints_.size()) + 1;
    const auto give_up = std::chrono::steady_clock::now() + options_.op_timeout;
    for (;;) {
      auto conn = Take(&errors);
      if (!conn) return Unreachable(errors);
      if (sends != nullptr) ++*sends;
      auto reply = conn->Post(target, text, options_.op_timeout);
      if (!reply.ok()) {
        errors += "; " + reply.status().message();
        Failed(conn->index());
      } else {
        boost::system::error_code ec;
        json::value v = json::parse(reply->body, ec);
        if (ec || !v.is_object()) {
          Failed(conn->index());
          errors += "; " + conn->endpoint().Name() + " sent a reply that is not a JSON object";
        } else if (reply->status == 200) {
          Give(std::move(conn));
          return std::move(v.as_object());
        } else {
          // {"error": "...", "message": "...", "code": 14}
          const json::object& o = v.as_object();
          std::int64_t code = Int(o, "code");
          std::string message = String(o, "message");
          if (message.empty()) message = "HTTP " + std::to_string(reply->status);
          std::string where = conn->endpoint().Name();
          if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded || reply->status >= 500) {
            Failed(conn->index());
            errors += "; " + where + ": " + message;
          } else {
            Give(std::move(conn));
            std::string full = "etcd at " + where + " answered: " + message;
            if (code == kGrpcNotFound) return Status::NotFound(full);
            if (code == kGrpcInvalidArgument) return Status::InvalidArgument(full);
            return Status::Unavailable(full);
          }
        }
      }
      ++tries;
      if (tries >= max_tries && std::chrono::steady_clock::now() >= give_up) {
        return Unreachable(errors);
      }
      if (tries >= static_cast<int>(endpoints_.size())) {
        std::this_thread::sleep_for(milliseconds(std::min(10 * tries, 100)));
      }
    }
  }

  // A new connection (for a watch stream) to the endpoint that answered last, else the next.
  Result<std::unique_ptr<GatewayConn>> Stream() {
    std::string errors;
    auto conn = Connect(&errors);
    if (!conn) return Unreachable(errors);
    return conn;
  }

  // The endpoint `index` failed: prefer the next one, and drop idle connections to it.
  void Failed(std::size_t index) {
    std::lock_guard lock(mu_);
    if (preferred_ == index) preferred_ = (index + 1) % endpoints_.size();
    std::erase_if(idle_, [&](const auto& c) { return c->index() == index; });
  }

  const std::vector<Endpoint>& endpoints() const { return endpoints_; }

 private:
  // `errors`: "; "-separated, one per attempt; each distinct one is said once.
  static Status Unreachable(const std::string& errors) {
    std::vector<std::string> seen;
    std::string said;
    for (std::size_t at = 0; at < errors.size();) {
      std::size_t next = errors.find("; ", at);
      if (next == std::string::npos) next = errors.size();
      std::string one = errors.substr(at, next - at);
      at = next + 2;
      if (one.empty() || std::find(seen.begin(), seen.end(), one) != seen.end()) continue;
      said += (seen.empty() ? "" : "; ") + one;
      seen.push_back(std::move(one));
    }
    return Status::Unavailable("no etcd endpoint answered (" + said +
                               "); check that etcd is running and has a leader");
  }

  std::unique_ptr<GatewayConn> Take(std::string* errors) {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return Connect(errors);
  }

  void Give(std::unique_ptr<GatewayConn> c) {
    if (c->closed()) return;
    std::lock_guard lock(mu_);
    if (static_cast<int>(idle_.size()) < std::max(options_.pool_size, 1)) {
      idle_.push_back(std::move(c));
    }
  }

  std::unique_ptr<GatewayConn> Connect(std::string* errors) {
    std::size_t start;
    {
      std::lock_guard lock(mu_);
      start = preferred_;
    }
    for (std::size_t k = 0; k < endpoints_.size(); ++k) {
      std::size_t i = (start + k) % endpoints_.size();
      auto c = std::make_unique<GatewayConn>(endpoints_[i], i);
      Status s = c->Connect(options_.op_timeout);
      if (s.ok()) {
        std::lock_guard lock(mu_);
        preferred_ = i;
        return c;
      }
      *errors += "; " + s.message();
    }
    return nullptr;
  }

  const std::vector<Endpoint> endpoints_;
  const LockOptions options_;
  std::mutex mu_;
  std::size_t preferred_ = 0;                       // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<GatewayConn>> idle_;  // GUARDED_BY(mu_)
};

// A contender's etcd lease.
struct LeaseRef {
  std::int64_t id = 0;
  std::int64_t ttl_s = 0;  // as granted (etcd may raise it to its minimum)
};

// Where a contender stands in a lock's line.
struct Place {
  std::int64_t mine = 0;         // the contender key's create_revision: its token; 0 if gone
  std::string first_key;         // base64; empty when the line is empty
  std::int64_t first_rev = 0;    // the holder's token
  std::int64_t first_lease = 0;  // the holder's lease
  std::string predecessor;       // base64 key just before mine; empty when I am first
  std::int64_t revision = 0;     // the store revision this view was read at
};

// The lock line protocol above, over a Gateway. Thread safety: safe for concurrent use; a
// waiting Acquire holds no lock while it waits (its watch has a connection of its own).
class EtcdBackend final : public LockBackend {
 public:
  EtcdBackend(std::vector<Endpoint> endpoints, const LockOptions& options, std::string service)
      : gateway_(std::move(endpoints), options),
        options_(options),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        service_(std::move(service)) {}

  Result<FencingToken> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                                  milliseconds* holder_remaining) override {
    auto joined = Join(lock, owner, ttl);
    if (!joined.ok()) return joined.status();
    const Place& place = joined->place;
    if (place.first_key == Key(lock, owner)) return Token(lock, place.first_rev);
    // Busy: leave the line at once, so nobody waits behind a contender that went away.
    *holder_remaining = Remaining(place.first_lease);
    (void)Revoke(Forget(owner).value_or(joined->lease).id, nullptr);
    return Status::Busy("held");
  }

  bool QueuesWaiters() const override { return true; }

  Result<FencingToken> AcquireInLine(std::string_view lock, std::string_view owner,
                                     milliseconds ttl, SteadyTime deadline,
                                     SteadyTime* valid_from) override {
    *valid_from = clock_->Now();
    auto joined = Join(lock, owner, ttl);
    if (!joined.ok()) return joined.status();
    const LeaseRef lease = joined->lease;
    const std::string my_key = Key(lock, owner);
    if (joined->place.first_key == my_key) return Token(lock, joined->place.first_rev);
    const std::int64_t mine = joined->place.mine;
    const milliseconds renew_every =
        std::max(milliseconds(50), milliseconds(lease.ttl_s * 1000) / 3);
    auto next_renewal = clock_->Now() + renew_every;
    auto leave = [&](Status why) -> Status {
      (void)Revoke(lease.id, nullptr);
      Forget(owner);
      return why;
    };
    for (;;) {
      auto where = Look(lock, owner, mine);
      if (!where.ok()) return leave(where.status());
      if (where->mine == 0) {
        return leave(Status::Unavailable(Subject(lock, service_) +
                                         ": this waiter's key vanished from the line (its etcd "
                                         "lease expired or the key was deleted)"));
      }
      if (where->first_key == my_key) {
        // First in line: restart the lease's TTL so the grant has a whole ttl of validity.
        *valid_from = clock_->Now();
        auto ttl_left = KeepAlive(lease.id);
        if (!ttl_left.ok()) return leave(ttl_left.status());
        if (*ttl_left <= 0) {
          return leave(Status::Unavailable(Subject(lock, service_) +
                                           ": the etcd lease expired while waiting in line"));
        }
        return Token(lock, mine);
      }
      if (where->predecessor.empty()) continue;  // the line moved between the reads
      // Wait for the predecessor's key to be deleted, renewing our own lease meanwhile. The
      // watch starts at the current revision (a watch from an older one is caught up by etcd
      // only every 100ms), and the key is checked again once the watch is in place.
      auto stream = gateway_.Stream();
      if (!stream.ok()) return leave(stream.status());
      json::object create{{"key", where->predecessor}, {"filters", json::array{"NOPUT"}}};
      Status s = (*stream)->OpenStream("/v3/watch",
                                       json::serialize(json::object{{"create_request", create}}),
                                       options_.op_timeout);
      if (s.ok()) {
        auto created = (*stream)->NextMessage(options_.op_timeout);
        if (!created.ok()) {
          s = created.status();
        } else if (!created->has_value() || !IsCreated(**created)) {
          s = Status::Unavailable("etcd at " + (*stream)->endpoint().Name() +
                                  " did not confirm a watch");
        }
      }
      if (!s.ok()) {
        gateway_.Failed((*stream)->index());
        return leave(s);
      }
      auto still_there = gateway_.Call(
          "/v3/kv/range", json::object{{"key", where->predecessor}, {"count_only", true}}, nullptr);
      if (!still_there.ok()) return leave(still_there.status());
      bool deleted = Int(*still_there, "count") == 0;
      while (!deleted) {
        auto now = clock_->Now();
        if (now >= deadline) return leave(Status::Timeout("still held"));
        if (now >= next_renewal) {
          auto ttl_left = KeepAlive(lease.id);
          if (!ttl_left.ok()) return leave(ttl_left.status());
          if (*ttl_left <= 0) {
            return leave(Status::Unavailable(Subject(lock, service_) +
                                             ": the etcd lease expired while waiting in line"));
          }
          next_renewal = clock_->Now() + renew_every;
          continue;
        }
        auto wait =
            std::chrono::duration_cast<milliseconds>(std::min(deadline, next_renewal) - now) +
            milliseconds(1);
        auto message = (*stream)->NextMessage(wait);
        if (!message.ok()) break;  // look again, on a new stream
        if (!message->has_value()) continue;
        deleted = IsDeleteEvent(**message);
        if (!deleted && IsCanceled(**message)) break;
      }
    }
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    const std::string my_key = Key(lock, owner);
    auto held = Held(lock, owner, token, "extend");
    if (!held.ok()) return held.status();
    LeaseRef lease = *held;
    std::int64_t want_s = Seconds(ttl);
    if (want_s > lease.ttl_s) {
      // A keep-alive restarts the TTL the lease was granted with; a longer ttl needs a new
      // lease, moved under the key in one txn that checks the key is still this grant's.
      auto bigger = Grant(ttl);
      if (!bigger.ok()) return bigger.status();
      json::object txn{
          {"compare",
           json::array{json::object{
               {"target", "CREATE"}, {"key", my_key}, {"create_revision", token.ToString()}}}},
          {"success", json::array{json::object{
                          {"request_put", json::object{{"key", my_key},
                                                       {"lease", std::to_string(bigger->id)},
                                                       {"ignore_value", true}}}}}}};
      auto reply = gateway_.Call("/v3/kv/txn", txn, nullptr);
      if (!reply.ok() || !Succeeded(*reply)) {
        (void)Revoke(bigger->id, nullptr);
        if (!reply.ok()) return reply.status();
        return NotHeld(lock, "extend");
      }
      (void)Revoke(lease.id, nullptr);
      Remember(owner, *bigger);
      return Status::Ok();
    }
    auto ttl_left = KeepAlive(lease.id);
    if (!ttl_left.ok()) return ttl_left.status();
    if (*ttl_left <= 0) {
      Forget(owner);
      return NotHeld(lock, "extend");
    }
    return Status::Ok();
  }

  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    std::optional<LeaseRef> lease = Forget(owner);
    if (!lease) {
      auto held = Held(lock, owner, token, "release");
      if (!held.ok()) return held.status();
      lease = *held;
    }
    // Revoking the lease deletes the key with it, in one Raft entry.
    int sends = 0;
    Status s = Revoke(lease->id, &sends);
    if (s.IsNotFound()) {
      if (sends > 1) return Status::Ok();  // a retry found our own earlier revoke done
      return NotHeld(lock, "release");
    }
    return s;
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    json::object txn{{"success", json::array{RangeFirst(lock), Range(LastKey(lock))}}};
    auto reply = gateway_.Call("/v3/kv/txn", txn, nullptr);
    if (!reply.ok()) return reply.status();
    LockInfo info;
    info.lock = std::string(lock);
    if (const json::object* last = FirstKv(TxnResponse(*reply, 1, "response_range"))) {
      if (auto t = FencingToken::FromInt(Int(*last, "mod_revision")); t.ok()) info.last_token = *t;
    }
    const json::object* first = FirstKv(TxnResponse(*reply, 0, "response_range"));
    if (first == nullptr) return info;
    info.held = true;
    info.owner = Base64Decode(String(*first, "value")).value_or("");
    auto token = Token(lock, Int(*first, "create_revision"));
    if (!token.ok()) return token.status();
    info.token = *token;
    info.remaining = Remaining(Int(*first, "lease"));
    return info;
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    // LockClient waits in line (AcquireInLine) instead; this serves any other caller.
    auto until = clock_->Now() + max_wait;
    auto stream = gateway_.Stream();
    if (!stream.ok()) return;
    json::object create{{"key", Base64Encode(Prefix(lock))},
                        {"range_end", Base64Encode(PrefixEnd(lock))},
                        {"filters", json::array{"NOPUT"}}};
    if (!(*stream)
             ->OpenStream("/v3/watch", json::serialize(json::object{{"create_request", create}}),
                          options_.op_timeout)
             .ok()) {
      return;
    }
    for (auto now = clock_->Now(); now < until; now = clock_->Now()) {
      auto m = (*stream)->NextMessage(std::chrono::duration_cast<milliseconds>(until - now));
      if (!m.ok() || (m->has_value() && IsDeleteEvent(**m))) return;
    }
  }

  const std::string& service() const override { return service_; }

 private:
  // Lock names may hold any byte but NUL; the length prefix keeps one lock's line from being
  // a prefix of another's ("a" and "a/b").
  static std::string Prefix(std::string_view lock) {
    return "fencekit/lock/" + std::to_string(lock.size()) + ":" + std::string(lock) + "/";
  }
  static std::string PrefixEnd(std::string_view lock) {
    std::string end = Prefix(lock);
    end.back() = '/' + 1;
    return end;
  }
  static std::string Key(std::string_view lock, std::string_view owner) {
    return Base64Encode(Prefix(lock) + std::string(owner));
  }
  // Written by every Enqueue: its mod_revision is the last token issued for the lock.
  static std::string LastKey(std::string_view lock) {
    return Base64Encode("fencekit/last/" + std::to_string(lock.size()) + ":" + std::string(lock));
  }

  static json::object Range(std::string key) {
    return json::object{{"request_range", json::object{{"key", std::move(key)}}}};
  }
  // The line's first key: the holder.
  static json::object RangeFirst(std::string_view lock) {
    return json::object{{"request_range", json::object{{"key", Base64Encode(Prefix(lock))},
                                                       {"range_end", Base64Encode(PrefixEnd(lock))},
                                                       {"sort_target", "CREATE"},
                                                       {"sort_order", "ASCEND"},
                                                       {"limit", "1"}}}};
  }
  static bool Succeeded(const json::object& txn) {
    const json::value* v = txn.if_contains("succeeded");  // omitted when false
    return v != nullptr && v->is_bool() && v->as_bool();
  }
  static std::int64_t Seconds(milliseconds ttl) {
    return std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
  }

  static std::optional<json::object> ParseResult(const std::string& line) {
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) return std::nullopt;
    const json::object* result = Object(v.as_object(), "result");
    if (result == nullptr) return std::nullopt;
    return *result;
  }
  static bool IsDeleteEvent(const std::string& line) {
    auto result = ParseResult(line);
    if (!result) return false;
    const json::value* events = result->if_contains("events");
    if (events == nullptr || !events->is_array()) return false;
    for (const json::value& e : events->as_array()) {
      if (e.is_object() && String(e.as_object(), "type") == "DELETE") return true;
    }
    return false;
  }
  static bool IsCreated(const std::string& line) {
    auto result = ParseResult(line);
    if (!result) return false;
    const json::value* c = result->if_contains("created");
    return c != nullptr && c->is_bool() && c->as_bool();
  }
  static bool IsCanceled(const std::string& line) {
    auto result = ParseResult(line);
    if (!result) return true;  // an error object: the watch is no use
    const json::value* c = result->if_contains("canceled");
    return c != nullptr && c->is_bool() && c->as_bool();
  }

  Result<FencingToken> Token(std::string_view lock, std::int64_t revision) {
    auto t = FencingToken::FromInt(revision);
    if (!t.ok()) {
      return Status::Unavailable("etcd at " + service_ + " sent an unusable revision " +
                                 std::to_string(revision) + " for lock \"" + std::string(lock) +
                                 "\"");
    }
    return *t;
  }

  Result<LeaseRef> Grant(milliseconds ttl) {
    auto reply = gateway_.Call("/v3/lease/grant",
                               json::object{{"TTL", std::to_string(Seconds(ttl))}}, nullptr);
    if (!reply.ok()) return reply.status();
    if (auto e = String(*reply, "error"); !e.empty()) {
      return Status::Unavailable("etcd at " + service_ + " refused a lease: " + e);
    }
    LeaseRef lease{Int(*reply, "ID"), Int(*reply, "TTL")};
    if (lease.id == 0) return Status::Unavailable("etcd at " + service_ + " granted no lease ID");
    return lease;
  }

  // The lease of a retried attempt by the same owner, else a new one.
  Result<LeaseRef> LeaseFor(std::string_view owner, milliseconds ttl) {
    {
      std::lock_guard lock(mu_);
      if (auto it = leases_.find(std::string(owner)); it != leases_.end()) return it->second;
    }
    auto lease = Grant(ttl);
    if (lease.ok()) Remember(owner, *lease);
    return lease;
  }
  void Remember(std::string_view owner, LeaseRef lease) {
    std::lock_guard lock(mu_);
    leases_[std::string(owner)] = lease;
  }
  std::optional<LeaseRef> Forget(std::string_view owner) {
    std::lock_guard lock(mu_);
    auto it = leases_.find(std::string(owner));
    if (it == leases_.end()) return std::nullopt;
    LeaseRef out = it->second;
    leases_.erase(it);
    return out;
  }

  // A lease (a retried attempt's, else a new one) and this owner's place in the lock's line.
  struct Joined {
    LeaseRef lease;
    Place place;
  };
  Result<Joined> Join(std::string_view lock, std::string_view owner, milliseconds ttl) {
    auto lease = LeaseFor(owner, ttl);
    if (!lease.ok()) return lease.status();
    auto place = Enqueue(lock, owner, *lease);
    if (!place.ok()) {
      Forget(owner);
      return place.status();
    }
    return Joined{*lease, std::move(place).value()};
  }

  // Joins the line (or finds this owner's key from an earlier attempt whose reply was lost).
  Result<Place> Enqueue(std::string_view lock, std::string_view owner, LeaseRef lease) {
    const std::string my_key = Key(lock, owner);
    json::object put_mine{{"request_put", json::object{{"key", my_key},
                                                       {"value", Base64Encode(owner)},
                                                       {"lease", std::to_string(lease.id)}}}};
    json::object put_last{
        {"request_put", json::object{{"key", LastKey(lock)}, {"value", Base64Encode(owner)}}}};
    json::object txn{
        {"compare", json::array{json::object{
                        {"target", "CREATE"}, {"key", my_key}, {"create_revision", "0"}}}},
        {"success", json::array{put_mine, put_last, RangeFirst(lock)}},
        {"failure", json::array{Range(my_key), RangeFirst(lock)}}};
    auto reply = gateway_.Call("/v3/kv/txn", txn, nullptr);
    if (!reply.ok()) return reply.status();
    Place place;
    const json::object* header = Object(*reply, "header");
    place.revision = header != nullptr ? Int(*header, "revision") : 0;
    const json::object* first = nullptr;
    if (Succeeded(*reply)) {
      place.mine = place.revision;
      first = FirstKv(TxnResponse(*reply, 2, "response_range"));
    } else {
      const json::object* kv = FirstKv(TxnResponse(*reply, 0, "response_range"));
      if (kv == nullptr) return BadReply(lock);
      place.mine = Int(*kv, "create_revision");
      if (std::int64_t id = Int(*kv, "lease"); id != lease.id) Remember(owner, {id, lease.ttl_s});
      first = FirstKv(TxnResponse(*reply, 1, "response_range"));
    }
    if (first == nullptr || place.mine == 0) return BadReply(lock);
    place.first_key = String(*first, "key");
    place.first_rev = Int(*first, "create_revision");
    place.first_lease = Int(*first, "lease");
    return place;
  }

  // Reads the line again: the holder, this waiter's key, and the key just before it.
  Result<Place> Look(std::string_view lock, std::string_view owner, std::int64_t mine) {
    json::object before{
        {"request_range", json::object{{"key", Base64Encode(Prefix(lock))},
                                       {"range_end", Base64Encode(PrefixEnd(lock))},
                                       {"sort_target", "CREATE"},
                                       {"sort_order", "DESCEND"},
                                       {"max_create_revision", std::to_string(mine - 1)},
                                       {"limit", "1"},
                                       {"keys_only", true}}}};
    json::object txn{{"success", json::array{RangeFirst(lock), before, Range(Key(lock, owner))}}};
    auto reply = gateway_.Call("/v3/kv/txn", txn, nullptr);
    if (!reply.ok()) return reply.status();
    Place place;
    const json::object* header = Object(*reply, "header");
    place.revision = header != nullptr ? Int(*header, "revision") : 0;
    if (const json::object* kv = FirstKv(TxnResponse(*reply, 2, "response_range"))) {
      place.mine = Int(*kv, "create_revision");
    }
    if (const json::object* first = FirstKv(TxnResponse(*reply, 0, "response_range"))) {
      place.first_key = String(*first, "key");
      place.first_rev = Int(*first, "create_revision");
      place.first_lease = Int(*first, "lease");
    }
    if (const json::object* pred = FirstKv(TxnResponse(*reply, 1, "response_range"))) {
      place.predecessor = String(*pred, "key");
    }
    return place;
  }

  // The lease of `owner`'s key when that key is still `token`'s grant; kNotHeld otherwise.
  Result<LeaseRef> Held(std::string_view lock, std::string_view owner, FencingToken token,
                        std::string_view what) {
    auto reply = gateway_.Call("/v3/kv/range", json::object{{"key", Key(lock, owner)}}, nullptr);
    if (!reply.ok()) return reply.status();
    const json::object* kv = FirstKv(reply.ok() ? &*reply : nullptr);
    if (kv == nullptr || Int(*kv, "create_revision") != token.value()) {
      Forget(owner);
      return NotHeld(lock, what);
    }
    std::optional<LeaseRef> known;
    {
      std::lock_guard l(mu_);
      if (auto it = leases_.find(std::string(owner)); it != leases_.end()) known = it->second;
    }
    std::int64_t id = Int(*kv, "lease");
    if (known && known->id == id) return *known;
    auto reply2 =
        gateway_.Call("/v3/lease/timetolive", json::object{{"ID", std::to_string(id)}}, nullptr);
    LeaseRef lease{id, reply2.ok() ? Int(*reply2, "grantedTTL") : 0};
    return lease;
  }

  // kNotHeld saying whether another owner holds the lock or it is free (the lease expired).
  Status NotHeld(std::string_view lock, std::string_view what) {
    std::string start = "cannot " + std::string(what) + " " + Subject(lock, service_) + ": ";
    auto reply = gateway_.Call("/v3/kv/txn",
                               json::object{{"success", json::array{RangeFirst(lock)}}}, nullptr);
    if (reply.ok()) {
      if (const json::object* first = FirstKv(TxnResponse(*reply, 0, "response_range"))) {
        return Status::NotHeld(start + "it is held by another owner (token " +
                               std::to_string(Int(*first, "create_revision")) +
                               "); this lease is lost");
      }
    }
    return Status::NotHeld(start + "the lease expired (the key is gone); acquire again");
  }

  // Seconds to live, or kNotFound-free 0 when the lease is gone.
  Result<std::int64_t> KeepAlive(std::int64_t id) {
    auto reply =
        gateway_.Call("/v3/lease/keepalive", json::object{{"ID", std::to_string(id)}}, nullptr);
    if (!reply.ok()) {
      if (reply.status().IsNotFound()) return std::int64_t{0};
      return reply.status();
    }
    if (const json::object* error = Object(*reply, "error")) {
      std::string m = String(*error, "message");
      if (Int(*error, "code") == kGrpcNotFound) return std::int64_t{0};
      return Status::Unavailable("etcd at " + service_ + " refused a keep-alive: " + m);
    }
    const json::object* result = Object(*reply, "result");
    return result != nullptr ? Int(*result, "TTL") : std::int64_t{0};
  }

  Status Revoke(std::int64_t id, int* sends) {
    auto reply = gateway_.Call("/v3/lease/revoke", json::object{{"ID", std::to_string(id)}}, sends);
    return reply.ok() ? Status::Ok() : reply.status();
  }

  milliseconds Remaining(std::int64_t lease_id) {
    if (lease_id == 0) return milliseconds(0);
    auto reply = gateway_.Call("/v3/lease/timetolive",
                               json::object{{"ID", std::to_string(lease_id)}}, nullptr);
    if (!reply.ok()) return milliseconds(0);
    return milliseconds(std::max<std::int64_t>(0, Int(*reply, "TTL")) * 1000);
  }

  Status BadReply(std::string_view lock) {
    return Status::Unavailable("unexpected reply from etcd at " + service_ + " for lock \"" +
                               std::string(lock) + "\"");
  }

  Gateway gateway_;
  LockOptions options_;
  Clock* clock_;
  std::string service_;
  std::mutex mu_;
  std::map<std::string, LeaseRef>
      leases_;  // owner -> its lease, while granted or in line. GUARDED_BY(mu_)
};

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenEtcdBackend(std::string_view uri,
                                                     const LockOptions& options) {
  std::string_view rest = uri.substr(std::string_view("etcd://").size());
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) + "\" is invalid: " +
                                   std::string(why) + "; use etcd://h1:p1[,h2:p2,...]");
  };
  std::vector<Endpoint> endpoints;
  if (rest.empty()) return bad("it names no endpoint");
  for (bool more = true; more;) {
    auto comma = rest.find(',');
    std::string_view node = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    rest = more ? rest.substr(comma + 1) : std::string_view();
    auto colon = node.rfind(':');
    if (node.empty() || colon == std::string_view::npos || colon == 0) {
      return bad("every endpoint needs host:port");
    }
    int port = 0;
    auto p = node.substr(colon + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535) {
      return bad("\"" + std::string(node) + "\" has no valid port");
    }
    endpoints.push_back({std::string(node.substr(0, colon)), std::string(p)});
  }
  auto backend = std::make_unique<EtcdBackend>(std::move(endpoints), options, std::string(uri));
  // Fail at open, with a clear message, when no endpoint answers.
  if (auto info = backend->Inspect("fencekit-open-check"); !info.ok()) return info.status();
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit
