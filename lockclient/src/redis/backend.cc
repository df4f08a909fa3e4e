// The Redis lock service: one node. What this file decides: tokens never go below what this
// client has seen (SeenTokens), and waiters block on the release signal. The scripts and their
// replies are in redis_protocol, the connections in redis_connection.
#include <atomic>
#include <boost/url/parse.hpp>
#include <charconv>

#include "lock_backend.h"
#include "endpoints.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"
#include "random_id.h"
#include "redis/connection.h"
#include "redis/protocol.h"
#include "redis/seen_tokens.h"

namespace fencekit::lockclient {
namespace {

namespace rp = redis_protocol;
using std::chrono::milliseconds;

// Thread safety: safe for concurrent use.
class RedisBackend final : public LockBackend {
 public:
  RedisBackend(RedisNode::Options node, const LockOptions& options)
      : node_(std::move(node), rp::Scripts()), options_(options), seen_(options.remembered_locks) {}

  // Connects, and reads the service id (making it on an empty server).
  Status Check() {
    if (Status s = node_.Check(); !s.ok()) return s;
    auto candidate = Candidate();
    if (!candidate.ok()) return candidate.status();
    auto reply = node_.Eval(rp::kServiceId, {rp::ServiceKey()}, {*candidate, ""}, "");
    if (!reply.ok()) return reply.status();
    auto id = rp::ParseServiceId(reply->get(), service());
    if (!id.ok()) return id.status();
    return Seen(*id);
  }

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                             milliseconds* holder_remaining) override {
    auto candidate = Candidate();
    if (!candidate.ok()) return candidate.status();
    auto reply = node_.Eval(rp::kAcquire, rp::AcquireKeys(lock),
                            rp::AcquireArgs(owner, ttl, seen_.Floor(lock), *candidate), lock);
    if (!reply.ok()) return reply.status();
    auto granted = rp::ParseAcquire(reply->get(), service(), lock);
    if (!granted.ok()) return granted.status();
    if (!granted->granted) {
      *holder_remaining = granted->holder_remaining;
      return Status::Busy(Subject(lock, service()) + " is held");
    }
    if (Status s = Seen(granted->service); !s.ok()) return s;
    auto token = FencingToken::FromInt(granted->token);
    if (!token.ok()) return Status::Unavailable(service() + " granted a bad token");
    if (granted->counter_behind) counter_behind_.fetch_add(1);
    seen_.Raise(lock, granted->token);
    return Granted{*token, std::move(granted->service)};
  }

  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override {
    auto reply = node_.Eval(rp::kCheck, rp::CheckKeys(lock), {}, lock);
    if (!reply.ok()) return reply.status();
    auto check = rp::ParseCheck(reply->get(), service(), lock);
    if (!check.ok()) return check.status();
    if (!check->service.empty()) {
      if (Status s = Seen(check->service); !s.ok()) return s;
    }
    // Without an id the server lost its data since any grant: nothing it holds is current.
    return TokenCheck{.current = check->holder == token && !check->service.empty(),
                      .holder = check->holder,
                      .service = std::move(check->service)};
  }

  std::string service_id() const override {
    MutexLock lock(id_mu_);
    return service_id_;
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    return OwnerChecked(rp::kExtend, lock, owner, ttl, "extend");
  }

  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    return OwnerChecked(rp::kRelease, lock, owner, options_.ttl, "release");
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    auto reply = node_.Eval(rp::kInspect, rp::InspectKeys(lock), {}, lock);
    if (!reply.ok()) return reply.status();
    return rp::ParseInspect(reply->get(), service(), lock);
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    node_.BlockingPop(rp::Key(lock, "signal"), max_wait);
  }

  const std::string& service() const override { return node_.service(); }
  std::uint64_t counter_resets_detected() const override { return counter_behind_.load(); }

 private:
  // Owner ids are unique per grant, so the owner alone identifies the lease (the token is not
  // sent: Redlock's nodes hold the same owner with different per-node tokens).
  Status OwnerChecked(rp::Script script, std::string_view lock, std::string_view owner,
                      milliseconds ttl, std::string_view what) {
    int sends = 0;
    auto reply = node_.Eval(script, rp::OwnerKeys(lock, script == rp::kRelease),
                            rp::OwnerArgs(owner, ttl), lock, &sends);
    if (!reply.ok()) return reply.status();
    // A release sent again after its connection broke finds its own first call done. (Had
    // that first call found the lease already released, this says released, not "already".)
    if (script == rp::kRelease && sends > 1 && rp::SaysAlreadyReleased(reply->get())) {
      return Status::Ok();
    }
    return rp::ParseOwnerChecked(reply->get(), service(), lock, what);
  }

  static Result<std::string> Candidate() {
    auto hex = RandomHex128();
    if (!hex.ok()) return hex.status();
    return "redis:" + *hex;
  }

  // Checks an id the server reported and remembers it as the current one.
  Status Seen(const std::string& id) {
    if (Status s = CheckServiceId(id); !s.ok()) {
      return Status::Unavailable(service() + " holds a malformed service id in " +
                                 rp::ServiceKey() + "; delete that key: " + s.message());
    }
    MutexLock lock(id_mu_);
    if (service_id_ != id) service_id_ = id;
    return Status::Ok();
  }

  RedisNode node_;
  const LockOptions options_;
  mutable Mutex id_mu_;
  std::string service_id_ FENCEKIT_GUARDED_BY(id_mu_);
  SeenTokens seen_;
  std::atomic<std::uint64_t> counter_behind_{0};
};

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenRedisBackend(std::string_view uri,
                                                      const LockOptions& options) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) + "\" is invalid: " +
                                   std::string(why) + "; use redis://host:port[/db]");
  };
  auto url = boost::urls::parse_uri(uri);
  if (!url) return bad("it is not a URI");
  if (url->host().empty()) return bad("it names no host");
  auto endpoints = ParseEndpoints(url->encoded_host_and_port(), 6379);
  if (!endpoints.ok()) return bad(endpoints.status().message());
  if (endpoints->size() != 1) return bad("it names several hosts (for Redlock use redlock://)");
  RedisNode::Options node{.endpoint = std::move(endpoints->front()),
                          .op_timeout = options.op_timeout,
                          .pool_size = options.pool_size};
  std::string path = url->path();
  if (!path.empty() && path != "/") {
    std::string_view digits = std::string_view(path).substr(1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), node.db);
    if (ec != std::errc() || end != digits.data() + digits.size() || node.db < 0) {
      return bad("the database must be a number, e.g. /0");
    }
  }
  if (url->has_password()) node.password = std::string(url->password());
  auto backend = std::make_unique<RedisBackend>(std::move(node), options);
  // Fail at open, with a clear message, when the server cannot be reached.
  if (Status s = backend->Check(); !s.ok()) return s;
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit::lockclient
