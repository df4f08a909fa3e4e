// The etcd lock service. What this file decides: a contender holds the lock when its key is
// first in the lock's line, waits by watching the key just before its own (first come, first
// served, one wake-up per release), keeps its etcd lease alive while it waits, and leaves the
// line when it gives up. etcd's revision is agreed by Raft and never goes backwards, across
// leader changes too, so the key's create_revision is the fencing token. The key layout and
// the gateway calls are in etcd_protocol, the HTTP connections in etcd_gateway.
#include <algorithm>
#include <map>
#include <optional>

#include "lock_backend.h"
#include "endpoints.h"
#include "etcd/protocol.h"
#include "etcd/tls.h"
#include "etcd/uri.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"

namespace fencekit::lockclient {
namespace {

using etcd::EtcdProtocol;
using etcd::LeaseRef;
using etcd::Place;
using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// Thread safety: safe for concurrent use; a waiting Acquire holds no lock while it waits (its
// watch has a connection of its own).
class EtcdBackend final : public LockBackend {
 public:
  EtcdBackend(EtcdUri uri, etcd::GatewayAccess access, const LockOptions& options)
      : etcd_(std::move(uri.endpoints), options.op_timeout, options.pool_size, uri.shown,
              std::move(access), std::move(uri.key_prefix), options.clock),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        service_(std::move(uri.shown)) {}

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                             milliseconds* holder_remaining) override {
    auto joined = Join(lock, owner, ttl);
    if (!joined.ok()) return joined.status();
    const Place& place = joined->place;
    if (place.first_key == etcd_.Key(lock, owner)) {
      return Grant(lock, place.first_rev, place.service);
    }
    // Busy: leave the line at once, so nobody waits behind a contender that went away.
    *holder_remaining = etcd_.Remaining(place.first_lease);
    (void)etcd_.Revoke(Forget(owner).value_or(joined->lease).id, nullptr);
    return Status::Busy("held");
  }

  bool QueuesWaiters() const override { return true; }

  Result<Granted> AcquireInLine(std::string_view lock, std::string_view owner, milliseconds ttl,
                                SteadyTime deadline, SteadyTime* valid_from) override;

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    // This client's own lease is kept alive at once and its key checked after (below); another
    // client's lease (fencectl extend) is found from the key first.
    LeaseRef lease;
    if (std::optional<LeaseRef> known = Known(owner)) {
      lease = *known;
    } else {
      auto held = Held(lock, owner, token, "extend");
      if (!held.ok()) return held.status();
      lease = *held;
    }
    if (EtcdProtocol::Seconds(ttl) > lease.ttl_s) {
      // A keep-alive restarts the TTL the lease was granted with; a longer ttl needs a new
      // lease, moved under the key in one txn that checks the key is still this grant's.
      auto bigger = etcd_.GrantLease(ttl);
      if (!bigger.ok()) return bigger.status();
      auto moved = etcd_.MoveKeyToLease(lock, owner, token, bigger->id);
      if (!moved.ok() || !*moved) {
        (void)etcd_.Revoke(bigger->id, nullptr);
        if (!moved.ok() && moved.status().IsNotFound()) {
          // The new lease expired before the move (a pause): the old one still holds the key.
          return Status::Unavailable("cannot extend " + Subject(lock, service_) +
                                     ": the new etcd lease expired before the key could move to "
                                     "it; try again");
        }
        if (!moved.ok()) return moved.status();
        return NotHeld(lock, owner, "extend");
      }
      (void)etcd_.Revoke(lease.id, nullptr);
      Remember(owner, *bigger);
      return Status::Ok();
    }
    auto ttl_left = etcd_.KeepAlive(lease.id);
    if (!ttl_left.ok()) return ttl_left.status();
    if (*ttl_left <= 0) {
      Forget(owner);
      return NotHeld(lock, owner, "extend");
    }
    // The key, after the keep-alive: a release leaves the lease alive (keyless) until it
    // expires, so only the key tells whether the lease still holds the lock.
    auto still = Held(lock, owner, token, "extend");
    if (!still.ok()) return still.status();
    if (still->id != lease.id) {  // moved to another lease meanwhile (another client's extend)
      Remember(owner, *still);
      auto moved_left = etcd_.KeepAlive(still->id);
      if (!moved_left.ok()) return moved_left.status();
      if (*moved_left <= 0) return NotHeld(lock, owner, "extend");
    }
    return Status::Ok();
  }

  // Deletes the key and records the release in one txn, so that a second release, from any
  // process, can say "already released". The lease, which holds nothing now, is left to expire:
  // revoking it too would cost a second Raft entry (and fsync) per release.
  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    int sends = 0;
    auto released = etcd_.ReleaseKey(lock, owner, token, &sends);
    if (!released.ok()) return released.status();
    Forget(owner);
    if (released->done) return Status::Ok();
    // A txn sent again after its connection broke finds its own first one done. (Had that
    // first one found the lease already released, this says released, not "already".)
    if (released->gone.released && sends > 1) return Status::Ok();
    return NotHeldBecause(lock, "release", released->gone);
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    auto head = etcd_.ReadHead(lock);
    if (!head.ok()) return head.status();
    if (Status s = Seen(head->service); !s.ok()) return s;
    LockInfo info;
    info.lock = std::string(lock);
    if (auto t = FencingToken::FromInt(head->last_issued); t.ok()) info.last_token = *t;
    if (!head->held) return info;
    info.held = true;
    info.owner = head->owner;
    auto token = etcd_.Token(lock, head->token);
    if (!token.ok()) return token.status();
    info.token = *token;
    info.remaining = etcd_.Remaining(head->lease);
    return info;
  }

  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override {
    auto holder = etcd_.ReadHolder(lock);
    if (!holder.ok()) return holder.status();
    if (Status s = Seen(holder->service); !s.ok()) return s;
    TokenCheck check{.service = std::move(holder->service)};
    if (holder->token) {
      auto t = etcd_.Token(lock, *holder->token);
      if (!t.ok()) return t.status();
      check.holder = *t;
      check.current = *t == token;
    }
    return check;
  }

  std::string service_id() const override {
    MutexLock lock(mu_);
    return service_id_;
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    // LockClient waits in line (AcquireInLine) instead; this serves any other caller.
    auto until = clock_->Now() + max_wait;
    auto stream = etcd_.WatchLine(lock);
    if (!stream.ok()) return;
    for (auto now = clock_->Now(); now < until; now = clock_->Now()) {
      auto m = (*stream)->NextMessage(std::chrono::duration_cast<milliseconds>(until - now));
      if (!m.ok() || (m->has_value() && EtcdProtocol::IsDeleteEvent(**m))) return;
    }
  }

  const std::string& service() const override { return service_; }

 private:
  // Checks the id a reply carried and remembers it.
  Status Seen(const std::string& id) {
    if (Status s = CheckServiceId(id); !s.ok()) {
      return Status::Unavailable("etcd at " + service_ + " sent no usable cluster id");
    }
    MutexLock lock(mu_);
    if (service_id_ != id) service_id_ = id;
    return Status::Ok();
  }

  // The grant of `revision`, by the cluster `service`.
  Result<Granted> Grant(std::string_view lock, std::int64_t revision, const std::string& service) {
    auto token = etcd_.Token(lock, revision);
    if (!token.ok()) return token.status();
    if (Status s = Seen(service); !s.ok()) return s;
    return Granted{*token, service};
  }

  // The lease of a retried attempt by the same owner, else a new one.
  Result<LeaseRef> LeaseFor(std::string_view owner, milliseconds ttl) {
    if (std::optional<LeaseRef> known = Known(owner)) return *known;
    auto lease = etcd_.GrantLease(ttl);
    if (lease.ok()) Remember(owner, *lease);
    return lease;
  }
  // The lease this client granted for `owner`, while granted or in line.
  std::optional<LeaseRef> Known(std::string_view owner) {
    MutexLock lock(mu_);
    auto it = leases_.find(std::string(owner));
    if (it == leases_.end()) return std::nullopt;
    return it->second;
  }
  void Remember(std::string_view owner, LeaseRef lease) {
    MutexLock lock(mu_);
    leases_[std::string(owner)] = lease;
  }
  std::optional<LeaseRef> Forget(std::string_view owner) {
    MutexLock lock(mu_);
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
    auto place = etcd_.Enqueue(lock, owner, *lease);
    if (!place.ok()) {
      Forget(owner);
      if (place.status().IsNotFound()) {
        // etcd: "requested lease not found". The lease expired between its grant and the
        // enqueue (this process was paused, or the request was held up): retryable, and the
        // next attempt takes a new lease.
        return Status::Unavailable(Subject(lock, service_) +
                                   ": the etcd lease of this attempt expired before it could "
                                   "join the line; try again");
      }
      return place.status();
    }
    // The key was already there, from an earlier attempt: its lease is the one to keep alive.
    if (place->existing_lease && *place->existing_lease != lease->id) {
      Remember(owner, {*place->existing_lease, lease->ttl_s});
    }
    return Joined{*lease, std::move(place).value()};
  }

  // The lease of `owner`'s key when that key is still `token`'s grant; kNotHeld otherwise.
  Result<LeaseRef> Held(std::string_view lock, std::string_view owner, FencingToken token,
                        std::string_view what) {
    auto key = etcd_.ReadKey(lock, owner);
    if (!key.ok()) return key.status();
    if (!*key || (*key)->create_revision != token.value()) {
      Forget(owner);
      return NotHeld(lock, owner, what);
    }
    std::optional<LeaseRef> known = Known(owner);
    std::int64_t id = (*key)->lease;
    if (known && known->id == id) return *known;
    return LeaseRef{id, etcd_.GrantedTtl(id)};
  }

  // kNotHeld saying whether `owner`'s lease was already released, another owner holds the
  // lock, or it is free (the lease expired).
  Status NotHeld(std::string_view lock, std::string_view owner, std::string_view what) {
    auto gone = etcd_.WhyGone(lock, owner);
    return NotHeldBecause(lock, what, gone.ok() ? *gone : etcd::Gone{});
  }
  Status NotHeldBecause(std::string_view lock, std::string_view what, const etcd::Gone& gone) {
    if (gone.released) return AlreadyReleased(what, lock, service_);
    std::string start = "cannot " + std::string(what) + " " + Subject(lock, service_) + ": ";
    if (gone.holder) {
      return Status::NotHeld(start + "it is held by another owner (token " +
                             std::to_string(*gone.holder) + "); this lease is lost");
    }
    return Status::NotHeld(start + "the lease expired (the key is gone); acquire again");
  }

  EtcdProtocol etcd_;
  Clock* const clock_;
  const std::string service_;
  mutable Mutex mu_;
  // owner -> its lease, while granted or in line.
  std::map<std::string, LeaseRef> leases_ FENCEKIT_GUARDED_BY(mu_);
  // "etcd:<cluster id hex>", as the last reply said.
  std::string service_id_ FENCEKIT_GUARDED_BY(mu_);
};

Result<Granted> EtcdBackend::AcquireInLine(std::string_view lock, std::string_view owner,
                                           milliseconds ttl, SteadyTime deadline,
                                           SteadyTime* valid_from) {
  *valid_from = clock_->Now();
  auto joined = Join(lock, owner, ttl);
  if (!joined.ok()) return joined.status();
  const LeaseRef lease = joined->lease;
  const std::string my_key = etcd_.Key(lock, owner);
  if (joined->place.first_key == my_key) {
    return Grant(lock, joined->place.first_rev, joined->place.service);
  }
  const std::int64_t mine = joined->place.mine;
  const milliseconds renew_every = std::max(milliseconds(50), milliseconds(lease.ttl_s * 1000) / 3);
  auto next_renewal = clock_->Now() + renew_every;
  auto leave = [&](Status why) -> Status {
    (void)etcd_.Revoke(lease.id, nullptr);
    Forget(owner);
    return why;
  };
  auto lease_expired = [&] {
    return leave(Status::Unavailable(Subject(lock, service_) +
                                     ": the etcd lease expired while waiting in line"));
  };
  for (;;) {
    auto where = etcd_.Look(lock, owner, mine);
    if (!where.ok()) return leave(where.status());
    if (where->mine == 0) {
      return leave(Status::Unavailable(Subject(lock, service_) +
                                       ": this waiter's key vanished from the line (its etcd "
                                       "lease expired or the key was deleted)"));
    }
    if (where->first_key == my_key) {
      // First in line: restart the lease's TTL so the grant has a whole ttl of validity.
      *valid_from = clock_->Now();
      auto ttl_left = etcd_.KeepAlive(lease.id);
      if (!ttl_left.ok()) return leave(ttl_left.status());
      if (*ttl_left <= 0) return lease_expired();
      return Grant(lock, mine, where->service);
    }
    if (where->predecessor.empty()) continue;  // the line moved between the reads
    // Wait for the predecessor's key to be deleted, renewing our own lease meanwhile. The
    // watch starts at the current revision (a watch from an older one is caught up by etcd
    // only every 100ms), and the key is checked again once the watch is in place.
    auto stream = etcd_.WatchKey(where->predecessor);
    if (!stream.ok()) return leave(stream.status());
    auto still_there = etcd_.Exists(where->predecessor);
    if (!still_there.ok()) return leave(still_there.status());
    bool deleted = !*still_there;
    while (!deleted) {
      auto now = clock_->Now();
      if (now >= deadline) return leave(Status::Timeout("still held"));
      if (now >= next_renewal) {
        auto ttl_left = etcd_.KeepAlive(lease.id);
        if (!ttl_left.ok()) return leave(ttl_left.status());
        if (*ttl_left <= 0) return lease_expired();
        next_renewal = clock_->Now() + renew_every;
        continue;
      }
      auto wait = std::chrono::duration_cast<milliseconds>(std::min(deadline, next_renewal) - now) +
                  milliseconds(1);
      auto message = (*stream)->NextMessage(wait);
      if (!message.ok()) break;  // look again, on a new stream
      if (!message->has_value()) continue;
      deleted = EtcdProtocol::IsDeleteEvent(**message);
      if (!deleted && EtcdProtocol::IsCanceled(**message)) break;
    }
  }
}

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenEtcdBackend(std::string_view uri,
                                                     const LockOptions& options) {
  auto parsed = ParseEtcdUri(uri);
  if (!parsed.ok()) return parsed.status();
  etcd::GatewayAccess access{.user = parsed->user, .password = parsed->password};
  if (parsed->tls) {
    auto tls = etcd::MakeTlsContext(parsed->ca_file, parsed->cert_file, parsed->key_file);
    if (!tls.ok()) {
      return Status::InvalidArgument("lock service " + parsed->shown + ": " +
                                     tls.status().message());
    }
    access.tls = std::move(tls).value();
  }
  auto backend =
      std::make_unique<EtcdBackend>(std::move(parsed).value(), std::move(access), options);
  // Fail at open, with a clear message, when no endpoint answers, the credentials are wrong or
  // the user may not use the key prefix.
  if (auto info = backend->Inspect("fencekit-open-check"); !info.ok()) return info.status();
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit::lockclient
