#include "fencekit/lockclient/lock_client.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "lock_backend.h"
#include "endpoints.h"
#include "lock_counters.h"
#include "random_id.h"
#include "released_leases.h"

namespace fencekit {

using lockclient::AlreadyReleased;
using lockclient::LeaseDrift;
using lockclient::LockBackend;
using lockclient::OpenEtcdBackend;
using lockclient::OpenZookeeperBackend;
using lockclient::OpenRedisBackend;
using lockclient::OpenRedlockBackend;
using lockclient::OpenSqliteBackend;
using lockclient::RandomHex128;
using lockclient::ReleasedLeases;
using lockclient::Subject;
using lockclient::UriWithoutPassword;

namespace {

using std::chrono::milliseconds;

// An owner id: unique per grant, so it alone identifies a lease.
Result<std::string> NewOwner() { return RandomHex128(); }

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

Status ValidateLockName(std::string_view lock) {
  if (lock.empty()) return Status::InvalidArgument("lock name is empty; name the lock");
  if (lock.size() > 1024) {
    return Status::InvalidArgument("lock name is " + std::to_string(lock.size()) +
                                   " bytes long; the limit is 1024 bytes");
  }
  if (lock.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("lock name contains a NUL byte; remove it");
  }
  return Status::Ok();
}

Status ValidateTtl(std::string_view lock, milliseconds ttl) {
  if (ttl < milliseconds(10)) {
    return Status::InvalidArgument("ttl " + FormatMs(ttl) + " for lock \"" + std::string(lock) +
                                   "\" is too short; use at least 10ms");
  }
  return Status::Ok();
}

}  // namespace

std::string LockUriWithoutPassword(std::string_view uri) { return UriWithoutPassword(uri); }

std::string lockclient::Subject(std::string_view lock, std::string_view service) {
  return "lock \"" + std::string(lock) + "\" on " + std::string(service);
}

Status lockclient::AlreadyReleased(std::string_view what, std::string_view lock,
                                   std::string_view service) {
  return Status::NotHeld("cannot " + std::string(what) + " " + Subject(lock, service) +
                         ": this lease was already released; " +
                         (what == "release" ? "nothing was done" : "acquire again"));
}

std::string DefaultLockUri() {
  if (const char* v = std::getenv("FENCEKIT_LOCKS"); v != nullptr && *v != '\0') return v;
  std::string state;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg == '/') {
    state = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    state = std::string(home) + "/.local/state";
  } else {
    state = "/tmp/fencekit-" + std::to_string(::getuid());
  }
  std::string dir = state + "/fencekit";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // a failure shows when the file is opened
  return "sqlite://" + dir + "/locks.db";
}

Result<std::unique_ptr<LockClient>> LockClient::Open(std::string_view uri, LockOptions options) {
  Result<std::unique_ptr<LockBackend>> backend = Status::InvalidArgument("");
  if (uri.empty()) return Open(DefaultLockUri(), options);
  if (uri.starts_with("sqlite://")) {
    backend = OpenSqliteBackend(uri, options);
  } else if (uri.starts_with("redis://")) {
    backend = OpenRedisBackend(uri, options);
  } else if (uri.starts_with("redlock://")) {
    backend = OpenRedlockBackend(uri, options);
  } else if (uri.starts_with("etcd://") || uri.starts_with("etcds://")) {
    backend = OpenEtcdBackend(uri, options);
  } else if (uri.starts_with("zk://") || uri.starts_with("zks://")) {
    backend = OpenZookeeperBackend(uri, options);
  } else {
    return Status::InvalidArgument("lock service URI \"" + LockUriWithoutPassword(uri) +
                                   "\" is not supported; use sqlite:///path/locks.db, "
                                   "redis://host:port[/db], redlock://h1:p1,h2:p2,h3:p3, "
                                   "etcd://h1:p1[,h2:p2,...], etcds://h1:p1[,...] or "
                                   "zk://h1:p1[,h2:p2,...][/prefix]");
  }
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<LockClient>(new LockClient(std::move(backend).value(), options));
}

LockClient::LockClient(std::unique_ptr<LockBackend> backend, LockOptions options)
    : backend_(std::move(backend)),
      released_(std::make_unique<ReleasedLeases>()),
      counters_(std::make_unique<Counters>()),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()) {}

LockClient::~LockClient() = default;

const std::string& LockClient::service() const { return backend_->service(); }

std::string LockClient::service_id() const { return backend_->service_id(); }

std::uint64_t LockClient::counter_resets_detected() const {
  return backend_->counter_resets_detected();
}

std::vector<NodeMetrics> LockClient::node_metrics() const { return backend_->node_metrics(); }

milliseconds LockClient::Backoff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  auto base = options_.retry_min * (1LL << std::min(attempt, 16));
  base = std::min<milliseconds>(base, options_.retry_max);
  // Full jitter in [base/2, base], so contenders do not retry in lockstep.
  auto half = base.count() / 2;
  return milliseconds(half + static_cast<long long>(rng() % (base.count() - half + 1)));
}

Result<Lease> LockClient::Grant(std::string_view lock, milliseconds ttl, const std::string& owner,
                                milliseconds* holder_remaining) {
  auto start = clock_->Now();
  counters_->attempts.fetch_add(1, std::memory_order_relaxed);
  auto token = backend_->TryAcquire(lock, owner, ttl, holder_remaining);
  if (!token.ok()) {
    if (token.status().IsBusy()) {
      counters_->busy.fetch_add(1, std::memory_order_relaxed);
      return Status::Busy(Subject(lock, service()) + " is held by another owner for another " +
                          FormatMs(*holder_remaining));
    }
    return token.status();
  }
  // The service's ttl started after `start`, at the latest when it answered: validity runs from
  // `start`, less the drift between the clocks' rates.
  Lease lease{std::string(lock), owner, token->token, ttl, start + ttl - Drift(ttl)};
  lease.service = std::move(token->service);
  if (Status late = RefuseIfBornExpired(lease, start); !late.ok()) return late;
  counters_->grants.fetch_add(1, std::memory_order_relaxed);
  return lease;
}

Status LockClient::RefuseIfBornExpired(const Lease& lease,
                                       std::chrono::steady_clock::time_point start) {
  const auto now = clock_->Now();
  if (now < lease.valid_until) return Status::Ok();
  (void)backend_->Release(lease.lock, lease.owner, lease.token);
  return Status::Unavailable(
      Subject(lease.lock, service()) + " granted the lock " +
      FormatMs(std::chrono::duration_cast<milliseconds>(now - start)) +
      " after the request began, which leaves no validity of the ttl " + FormatMs(lease.ttl) +
      " (less the drift " + FormatMs(std::chrono::duration_cast<milliseconds>(Drift(lease.ttl))) +
      "); the lease was released");
}

void LockClient::CountWait(std::chrono::steady_clock::time_point began) {
  auto took = clock_->Now() - began;
  double seconds = std::chrono::duration<double>(took).count();
  std::size_t bucket = 0;
  while (bucket < std::size(LockMetrics::kWaitBounds) &&
         seconds > LockMetrics::kWaitBounds[bucket]) {
    ++bucket;
  }
  counters_->wait_buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  counters_->wait_count.fetch_add(1, std::memory_order_relaxed);
  counters_->wait_ns.fetch_add(
      static_cast<std::uint64_t>(std::max<std::int64_t>(
          0, std::chrono::duration_cast<std::chrono::nanoseconds>(took).count())),
      std::memory_order_relaxed);
}

LockMetrics LockClient::metrics() const {
  LockMetrics m;
  const Counters& c = *counters_;
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  m.acquire_attempts = get(c.attempts);
  m.grants = get(c.grants);
  m.busy = get(c.busy);
  m.timeouts = get(c.timeouts);
  m.renewals = get(c.renewals);
  m.renewal_failures = get(c.renewal_failures);
  m.lost_refused = get(c.lost_refused);
  m.lost_validity = get(c.lost_validity);
  m.lost_marked = get(c.lost_marked);
  m.counter_resets = counter_resets_detected();
  m.token_checks = get(c.checks);
  m.token_check_failures = get(c.check_failures);
  for (const auto& b : c.wait_buckets) m.wait_buckets.push_back(get(b));
  m.wait_count = get(c.wait_count);
  m.wait_seconds_sum = static_cast<double>(get(c.wait_ns)) / 1e9;
  m.nodes = node_metrics();
  return m;
}

std::chrono::steady_clock::duration lockclient::LeaseDrift(const LockOptions& options,
                                                           milliseconds ttl) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double, std::milli>(ttl.count() * options.drift_factor)) +
         options.drift_min;
}

std::chrono::steady_clock::duration LockClient::Drift(milliseconds ttl) const {
  return LeaseDrift(options_, ttl);
}

Result<Lease> LockClient::TryAcquire(std::string_view lock) {
  return TryAcquire(lock, options_.ttl);
}

Result<Lease> LockClient::TryAcquire(std::string_view lock, milliseconds ttl) {
  if (auto s = ValidateLockName(lock); !s.ok()) return s;
  if (auto s = ValidateTtl(lock, ttl); !s.ok()) return s;
  auto owner = NewOwner();
  if (!owner.ok()) return owner.status();
  // One retry of an unreachable service, with the same owner: the service returns the same
  // token if the first attempt was granted but its reply lost.
  milliseconds holder_remaining{0};
  auto r = Grant(lock, ttl, *owner, &holder_remaining);
  if (!r.ok() && r.status().IsUnavailable()) {
    clock_->SleepFor(Backoff(0));
    r = Grant(lock, ttl, *owner, &holder_remaining);
  }
  return r;
}

Result<Lease> LockClient::Acquire(std::string_view lock, milliseconds wait) {
  return Acquire(lock, wait, options_.ttl);
}

Result<Lease> LockClient::Acquire(std::string_view lock, milliseconds wait, milliseconds ttl) {
  if (auto s = ValidateLockName(lock); !s.ok()) return s;
  if (auto s = ValidateTtl(lock, ttl); !s.ok()) return s;
  if (wait < milliseconds(0)) {
    return Status::InvalidArgument("the wait for " + Subject(lock, service()) + " is " +
                                   FormatMs(wait) + "; it must be >= 0");
  }
  auto owner = NewOwner();
  if (!owner.ok()) return owner.status();
  auto began = clock_->Now();
  const auto deadline = began + wait;  // every deadline below is on clock_
  if (backend_->QueuesWaiters()) {
    counters_->attempts.fetch_add(1, std::memory_order_relaxed);
    auto lease = AcquireInLine(lock, deadline, ttl, *owner, began);
    CountWait(began);
    if (lease.ok()) counters_->grants.fetch_add(1, std::memory_order_relaxed);
    if (lease.status().IsTimeout()) counters_->timeouts.fetch_add(1, std::memory_order_relaxed);
    return lease;
  }
  Status last;
  for (int attempt = 0;; ++attempt) {
    milliseconds holder_remaining{0};
    auto r = Grant(lock, ttl, *owner, &holder_remaining);
    if (r.ok()) {
      CountWait(began);
      return r;
    }
    last = r.status();
    if (!last.IsBusy() && !last.IsUnavailable()) return last;
    auto now = clock_->Now();
    if (now >= deadline) break;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1);
    if (last.IsBusy()) {
      // Sleep until a release signal, the holder's expiry, or the deadline.
      backend_->WaitForRelease(
          lock, std::chrono::ceil<milliseconds>(
                    clock_->RealWait(std::min(left, holder_remaining + milliseconds(1)))));
    } else {
      clock_->SleepFor(std::min(left, Backoff(attempt)));
    }
  }
  auto waited = std::chrono::duration_cast<milliseconds>(clock_->Now() - began);
  CountWait(began);
  if (last.IsUnavailable()) {
    return Status::Unavailable(last.message() + " (gave up after " + FormatMs(waited) + ")");
  }
  counters_->timeouts.fetch_add(1, std::memory_order_relaxed);
  return Status::Timeout(Subject(lock, service()) + " is still held by another owner after " +
                         FormatMs(waited) + " of waiting; retry later or wait longer");
}

Result<Lease> LockClient::AcquireInLine(std::string_view lock,
                                        std::chrono::steady_clock::time_point deadline,
                                        milliseconds ttl, const std::string& owner,
                                        std::chrono::steady_clock::time_point began) {
  for (int attempt = 0;; ++attempt) {
    std::chrono::steady_clock::time_point valid_from;
    auto token = backend_->AcquireInLine(lock, owner, ttl, deadline, &valid_from);
    auto now = clock_->Now();
    if (token.ok()) {
      Lease lease{std::string(lock), owner, token->token, ttl, valid_from + ttl - Drift(ttl)};
      lease.service = std::move(token->service);
      if (Status late = RefuseIfBornExpired(lease, valid_from); !late.ok()) return late;
      return lease;
    }
    auto waited = std::chrono::duration_cast<milliseconds>(now - began);
    if (token.status().IsTimeout()) {
      return Status::Timeout(Subject(lock, service()) + " is still held by another owner after " +
                             FormatMs(waited) + " of waiting; retry later or wait longer");
    }
    if (!token.status().IsUnavailable()) return token.status();
    if (now >= deadline) {
      return Status::Unavailable(token.status().message() + " (gave up after " + FormatMs(waited) +
                                 ")");
    }
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1);
    clock_->SleepFor(std::min(left, Backoff(attempt)));
  }
}

Status LockClient::Extend(Lease& lease, milliseconds ttl) {
  if (auto s = ValidateTtl(lease.lock, ttl); !s.ok()) return s;
  auto start = clock_->Now();
  Status s = backend_->Extend(lease.lock, lease.owner, lease.token, ttl);
  (s.ok() ? counters_->renewals : counters_->renewal_failures)
      .fetch_add(1, std::memory_order_relaxed);
  if (s.IsNotHeld() && released_->Contains(lease)) {
    return AlreadyReleased("extend", lease.lock, service());
  }
  if (!s.ok()) return s;
  lease.ttl = ttl;
  lease.valid_until = start + ttl - Drift(ttl);  // as for a grant
  return Status::Ok();
}

Status LockClient::Release(const Lease& lease) {
  // The service is asked every time (a partial Redlock release may have left keys to clear);
  // only its refusal is checked against what this client released.
  Status s = backend_->Release(lease.lock, lease.owner, lease.token);
  if (s.ok()) {
    released_->Add(lease);
  } else if (s.IsNotHeld() && released_->Contains(lease)) {
    return AlreadyReleased("release", lease.lock, service());
  }
  return s;
}

Result<LockInfo> LockClient::Inspect(std::string_view lock) {
  if (auto s = ValidateLockName(lock); !s.ok()) return s;
  return backend_->Inspect(lock);
}

Result<TokenCheck> LockClient::CheckToken(std::string_view lock, FencingToken token) {
  if (auto s = ValidateLockName(lock); !s.ok()) return s;
  auto check = backend_->CheckToken(lock, token);
  (check.ok() ? counters_->checks : counters_->check_failures)
      .fetch_add(1, std::memory_order_relaxed);
  return check;
}

}  // namespace fencekit
