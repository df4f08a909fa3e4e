// The ZooKeeper lock service. What this file decides: the lease is a ZooKeeper session (its
// timeout the ttl); a contender joins the lock's line with an ephemeral sequential znode, holds
// the lock when its znode is first, and waits by watching the znode just before its own (first
// come, first served, one wake-up per release), as Curator's InterProcessMutex does. The token
// is the znode's czxid: zxids are agreed by the ensemble and only grow, across leader elections
// too. The service id is a random id kept in a znode under the prefix, made by the first client
// of a new (or wiped) ensemble.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <optional>

#include "lock_backend.h"
#include "zookeeper/ensemble.h"
#include "zookeeper/leases.h"
#include "zookeeper/session.h"
#include "zookeeper/uri.h"
#include "zookeeper/znodes.h"

namespace fencekit::lockclient {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;
using zk::HeldNode;
using zk::Session;
using zk::Zxid;
using zk::ContenderPrefix;
using zk::Escape;
using zk::OwnerOf;
using zk::SortLine;

// Thread safety: safe for concurrent use; a waiting Acquire holds no lock while it waits.
class ZookeeperBackend final : public LockBackend {
 public:
  ZookeeperBackend(ZookeeperUri uri, const LockOptions& options)
      : uri_(std::move(uri)),
        options_(options),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        // Connecting takes a round trip and a session's creation by the ensemble's leader.
        ensemble_(uri_, options.op_timeout, std::max(options.op_timeout, milliseconds(1'500))),
        leases_(clock_, [this](const HeldNode& ended) { EndLease(ended); }) {}

  // Opens the session for Inspect and CheckToken and learns the service id.
  Status Open() {
    auto session = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
    return session.ok() ? Status::Ok() : session.status();
  }

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                             milliseconds* holder_remaining) override {
    auto joined = Join(lock, owner, ttl);
    if (!joined.ok()) return joined.status();
    if (joined->line.front() == joined->name) return Grant(lock, owner, *joined, ttl);
    // Busy: leave the line at once, so nobody waits behind a contender that went away.
    (void)joined->session->Delete(LockPath(lock) + "/" + joined->name, options_.op_timeout);
    leases_.Forget(owner);
    *holder_remaining = ttl;  // ZooKeeper does not say when another session would expire
    return Status::Busy("held");
  }

  bool QueuesWaiters() const override { return true; }

  Result<Granted> AcquireInLine(std::string_view lock, std::string_view owner, milliseconds ttl,
                                SteadyTime deadline, SteadyTime* valid_from) override {
    *valid_from = clock_->Now();
    auto joined = Join(lock, owner, ttl);
    if (!joined.ok()) return joined.status();
    const std::string dir = LockPath(lock);
    std::shared_ptr<Session> session = joined->session;
    auto leave = [&](Status why) -> Status {
      (void)session->Delete(dir + "/" + joined->name, options_.op_timeout);
      leases_.Forget(owner);
      return why;
    };
    for (;;) {
      auto& line = joined->line;
      auto mine = std::find(line.begin(), line.end(), joined->name);
      if (mine == line.end()) {
        leases_.Forget(owner);
        return Status::Unavailable(Subject(lock, uri_.shown) +
                                   ": this waiter's znode vanished from the line (its ZooKeeper "
                                   "session expired, or the znode was deleted)");
      }
      if (mine == line.begin()) return Grant(lock, owner, *joined, ttl);
      // Watch the predecessor; look again once it is gone (or the session changed state).
      const std::string predecessor = dir + "/" + *(mine - 1);
      for (;;) {
        if (clock_->Now() >= deadline) return leave(Status::Timeout("still held"));
        if (!session->alive()) return leave(Expired(lock, "while waiting in line"));
        const std::uint64_t seen = session->changes();
        auto there = session->Exists(predecessor, /*watch=*/true, options_.op_timeout);
        if (!there.ok()) return leave(there.status());
        if (!there->has_value()) break;
        const auto left = deadline - clock_->Now();
        if (left <= SteadyTime::duration::zero()) continue;
        session->WaitForChange(seen, std::chrono::steady_clock::now() + clock_->RealWait(left));
      }
      // Validity counts from before the read that shows this contender first.
      *valid_from = clock_->Now();
      auto children = session->Children(dir, options_.op_timeout);
      if (!children.ok()) return leave(children.status());
      SortLine(*children);
      line = std::move(children).value();
    }
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken token,
                milliseconds ttl) override {
    std::optional<HeldNode> held = leases_.Known(owner);
    if (!held || held->lock != lock || held->czxid != token.value()) {
      auto found = Find(lock, owner, token);
      if (!found.ok()) return found.status();
      if (!found->has_value()) return NotHeld(lock, owner, token, "extend");
      return Status::InvalidArgument(
          "cannot extend " + Subject(lock, uri_.shown) +
          ": a ZooKeeper lease is its holder's session, which only the process that took it can "
          "keep alive");
    }
    if (ttl > held->session->negotiated()) {
      return Status::InvalidArgument("cannot extend " + Subject(lock, uri_.shown) + " to " +
                                     std::to_string(ttl.count()) +
                                     "ms: the lease is a ZooKeeper session of " +
                                     std::to_string(held->session->negotiated().count()) +
                                     "ms; acquire with the longer ttl instead");
    }
    // A round trip on the session: the ensemble heard from it, so it lives a session timeout
    // from now at least (LockClient counts the validity from before this call).
    const SteadyTime started = clock_->Now();
    auto there = held->session->Exists(held->path, /*watch=*/false, options_.op_timeout);
    if (!there.ok()) return there.status();
    if (!there->has_value() || **there != token.value() || !held->session->alive()) {
      leases_.Forget(owner);
      return NotHeld(lock, owner, token, "extend");
    }
    leases_.Renewed(owner, started + ttl);
    return Status::Ok();
  }

  // Deletes the znode and records the release in the lock's folder in one transaction, so that
  // a second release, from any process, can say "already released".
  Status Release(std::string_view lock, std::string_view owner, FencingToken token) override {
    std::optional<HeldNode> held = leases_.Known(owner);
    std::shared_ptr<Session> session;
    std::string path;
    if (held && held->lock == lock && held->czxid == token.value() && held->session->alive()) {
      session = held->session;
      path = held->path;
    } else {
      // Another process's lease (fencectl release): its znode, found by owner and token.
      auto found = Find(lock, owner, token);
      if (!found.ok()) return found.status();
      if (!found->has_value()) {
        leases_.Forget(owner);
        return NotHeld(lock, owner, token, "release");
      }
      auto any = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
      if (!any.ok()) return any.status();
      session = *any;
      path = **found;
    }
    Status deleted =
        session->DeleteAndSet(path, LockPath(lock), std::to_string(token.value()),
                              options_.op_timeout);
    leases_.Forget(owner);
    if (deleted.IsNotFound()) return NotHeld(lock, owner, token, "release");
    return deleted;
  }

  Result<LockInfo> Inspect(std::string_view lock) override {
    auto head = Head(lock);
    if (!head.ok()) return head.status();
    LockInfo info;
    info.lock = std::string(lock);
    auto released = LastReleased(lock);
    if (!released.ok()) return released.status();
    if (auto last = FencingToken::FromInt(*released); *released > 0 && last.ok()) {
      info.last_token = *last;
    }
    if (!head->has_value()) return info;
    info.held = true;
    info.owner = (*head)->owner;
    info.token = (*head)->token;
    // The holder's session timeout: how long the lock stays held once its holder goes silent.
    info.remaining = (*head)->ttl;
    if (!info.last_token || *info.last_token < (*head)->last) info.last_token = (*head)->last;
    return info;
  }

  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override {
    auto head = Head(lock);
    if (!head.ok()) return head.status();
    TokenCheck check{.service = service_id()};
    if (head->has_value()) {
      check.holder = (*head)->token;
      check.current = (*head)->token == token;
    }
    return check;
  }

  std::string service_id() const override { return ensemble_.service_id(); }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    auto session = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
    if (!session.ok()) return;
    const auto until = std::chrono::steady_clock::now() + max_wait;
    auto children = (*session)->Children(LockPath(lock), options_.op_timeout);
    if (!children.ok()) return;
    SortLine(*children);
    if (children->empty()) return;
    const std::uint64_t seen = (*session)->changes();
    auto there =
        (*session)->Exists(LockPath(lock) + "/" + children->front(), true, options_.op_timeout);
    if (!there.ok() || !there->has_value()) return;
    (*session)->WaitForChange(seen, until);
  }

  const std::string& service() const override { return uri_.shown; }

 private:
  struct Joined {
    std::shared_ptr<Session> session;
    std::string name;  // this contender's znode, in the lock's folder
    Zxid czxid = 0;
    std::vector<std::string> line;  // sorted
  };
  struct HeadNode {
    std::string owner;
    FencingToken token;
    milliseconds ttl{0};  // its session timeout, as its znode says
    FencingToken last;    // the newest contender's token (the line's last)
  };

  std::string LockPath(std::string_view lock) const {
    return uri_.prefix + "/locks/" + Escape(lock);
  }

  // This owner's znode in the lock's line (a retried attempt's, else a new one), and the line.
  Result<Joined> Join(std::string_view lock, std::string_view owner, milliseconds ttl) {
    auto session = ensemble_.SessionFor(ttl, /*lease=*/true);
    if (!session.ok()) return session.status();
    Joined joined{.session = *session};
    const std::string dir = LockPath(lock);
    const std::string prefix = ContenderPrefix(owner);
    // A retry after an attempt that made its znode, or may have, finds it. (Only then: a first
    // attempt has none, and a read more per grant is a tenth of the cycle.)
    if (std::optional<HeldNode> before = leases_.Known(owner);
        before && before->lock == lock && before->session == joined.session) {
      if (!before->path.empty()) {
        joined.name = before->path.substr(dir.size() + 1);
      } else {
        auto children = joined.session->Children(dir, options_.op_timeout);
        if (!children.ok() && !children.status().IsNotFound()) return children.status();
        if (children.ok()) {
          for (const auto& c : *children) {
            if (c.starts_with(prefix)) joined.name = c;
          }
        }
      }
    }
    std::optional<std::vector<std::string>> line;
    if (joined.name.empty()) {
      for (int attempt = 0;; ++attempt) {
        // Its data: the session timeout, which Inspect reports as the time a silent holder
        // keeps the lock.
        auto made = joined.session->CreateThenList(
            dir + "/" + prefix, std::to_string(joined.session->negotiated().count()),
            ZOO_EPHEMERAL_SEQUENTIAL, dir, options_.op_timeout);
        if (made.ok()) {
          joined.name = made->created.path.substr(dir.size() + 1);
          joined.czxid = made->created.czxid;
          if (!made->listed.ok()) {
            // Made but not listed: a retry takes it up; if nobody retries, the reaper deletes
            // it after the ttl (else it would block the line while this process runs).
            MarkUnsettled(lock, owner, joined.session, made->created.path, ttl);
            return made->listed;
          }
          line = std::move(made->children);
          break;
        }
        if (!made.status().IsNotFound()) {
          // The znode may have been made: as above, found by a retry or deleted by the reaper.
          MarkUnsettled(lock, owner, joined.session, "", ttl);
          return made.status();
        }
        // No folder yet: make it (and the prefix above it).
        if (attempt == 3) return made.status();
        if (Status s = zk::MakeParents(*joined.session, dir + "/x", options_.op_timeout); !s.ok()) return s;
      }
    } else {
      auto there = joined.session->Exists(dir + "/" + joined.name, false, options_.op_timeout);
      if (!there.ok()) return there.status();
      if (!there->has_value()) {
        leases_.Forget(owner);
        return Status::Unavailable(Subject(lock, uri_.shown) + ": retry");
      }
      joined.czxid = **there;
    }
    // In line, not granted: the reaper leaves it alone (an unsettled attempt had set a time).
    leases_.InLine(HeldNode{std::string(lock), std::string(owner), joined.session,
                            dir + "/" + joined.name, joined.czxid});
    if (!line) {
      auto children = joined.session->Children(dir, options_.op_timeout);
      if (!children.ok()) {
        MarkUnsettled(lock, owner, joined.session, dir + "/" + joined.name, ttl);
        return children.status();
      }
      line = std::move(children).value();
    }
    SortLine(*line);
    joined.line = std::move(*line);
    if (std::find(joined.line.begin(), joined.line.end(), joined.name) == joined.line.end()) {
      leases_.Forget(owner);
      return Expired(lock, "before it joined the line");
    }
    return joined;
  }

  Result<Granted> Grant(std::string_view lock, std::string_view owner, const Joined& joined,
                        milliseconds ttl) {
    leases_.Renewed(owner, clock_->Now() + ttl);
    auto token = FencingToken::FromInt(joined.czxid);
    if (!token.ok()) {
      return Status::Unavailable("ZooKeeper " + uri_.shown + " gave " + Subject(lock, uri_.shown) +
                                 " a znode without a usable czxid");
    }
    return Granted{*token, service_id()};
  }

  // The first contender of the lock's line: its owner and token; nullopt when free.
  Result<std::optional<HeadNode>> Head(std::string_view lock) {
    auto session = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
    if (!session.ok()) return session.status();
    const std::string dir = LockPath(lock);
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto children = (*session)->Children(dir, options_.op_timeout);
      if (!children.ok() && children.status().IsNotFound()) return std::optional<HeadNode>();
      if (!children.ok()) return children.status();
      SortLine(*children);
      if (children->empty()) return std::optional<HeadNode>();
      auto data = (*session)->Get(dir + "/" + children->front(), options_.op_timeout);
      auto there = (*session)->Exists(dir + "/" + children->front(), false, options_.op_timeout);
      auto newest = (*session)->Exists(dir + "/" + children->back(), false, options_.op_timeout);
      if (!there.ok()) return there.status();
      if (!newest.ok()) return newest.status();
      if (!there->has_value() || !data.ok()) continue;  // released meanwhile: look again
      auto token = FencingToken::FromInt(**there);
      if (!token.ok()) return token.status();
      HeadNode head{.owner = OwnerOf(children->front()), .token = *token};
      head.last = *token;
      if (newest->has_value()) {
        if (auto last = FencingToken::FromInt(**newest); last.ok()) head.last = *last;
      }
      head.ttl = milliseconds(std::strtoll(data->c_str(), nullptr, 10));
      return std::optional<HeadNode>(std::move(head));
    }
    return Status::Unavailable(Subject(lock, uri_.shown) + ": the line kept changing");
  }

  // The token of the lock's last release (its folder's data); 0 when none was recorded.
  Result<std::int64_t> LastReleased(std::string_view lock) {
    auto session = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
    if (!session.ok()) return session.status();
    auto data = (*session)->Get(LockPath(lock), options_.op_timeout);
    if (!data.ok() && data.status().IsNotFound()) return std::int64_t{0};
    if (!data.ok()) return data.status();
    return std::strtoll(data->c_str(), nullptr, 10);
  }

  // kNotHeld for `what` ("release", "extend") of `token`'s lease, whose znode is gone: already
  // released, another owner holds the lock, or the lease expired.
  Status NotHeld(std::string_view lock, std::string_view owner, FencingToken token,
                 std::string_view what) {
    auto released = LastReleased(lock);
    if (released.ok() && *released == token.value()) {
      return AlreadyReleased(what, lock, uri_.shown);
    }
    const std::string start = "cannot " + std::string(what) + " " + Subject(lock, uri_.shown) + ": ";
    auto head = Head(lock);
    if (head.ok() && head->has_value() && ((*head)->token != token || (*head)->owner != owner)) {
      return Status::NotHeld(start + "it is held by another owner (token " +
                             std::to_string((*head)->token.value()) + "); this lease is lost");
    }
    return Status::NotHeld(start +
                           "the lease expired (its ZooKeeper session ended and its znode is "
                           "gone); acquire again");
  }

  // The znode of `owner`'s lease of `token` (another process's, or this one's), nullopt when
  // it is gone.
  Result<std::optional<std::string>> Find(std::string_view lock, std::string_view owner,
                                          FencingToken token) {
    auto session = ensemble_.SessionFor(options_.ttl, /*lease=*/false);
    if (!session.ok()) return session.status();
    const std::string dir = LockPath(lock);
    auto children = (*session)->Children(dir, options_.op_timeout);
    if (!children.ok() && !children.status().IsNotFound()) return children.status();
    const std::string prefix = ContenderPrefix(owner);
    if (children.ok()) {
      for (const auto& c : *children) {
        if (!c.starts_with(prefix)) continue;
        auto there = (*session)->Exists(dir + "/" + c, false, options_.op_timeout);
        if (!there.ok()) return there.status();
        if (there->has_value() && **there == token.value()) {
          return std::optional<std::string>(dir + "/" + c);
        }
      }
    }
    return std::optional<std::string>();
  }

  // kNotHeld: the lease's znode is gone (its session expired, or it was released).
  Status Expired(std::string_view lock, std::string_view when) {
    return Status::NotHeld(Subject(lock, uri_.shown) + ": the lease expired" +
                           (when.empty() ? "" : " " + std::string(when)) +
                           " (its ZooKeeper session ended and its znode is gone); acquire again");
  }

  // `owner`'s attempt ended with its znode made (`path`) or perhaps made (`path` empty: a create
  // of unknown outcome): a retry takes it up, else the reaper deletes it after the ttl.
  void MarkUnsettled(std::string_view lock, std::string_view owner,
                     std::shared_ptr<Session> session, std::string path, milliseconds ttl) {
    leases_.Unsettled(
        HeldNode{std::string(lock), std::string(owner), std::move(session), std::move(path), 0},
        clock_->Now() + ttl);
  }

  // An ended lease's znode is deleted (on the reaper's thread); a paused or cut-off process's
  // session expires on the ensemble instead, after the same ttl.
  void EndLease(const HeldNode& h) {
    if (!h.path.empty()) {
      (void)h.session->Delete(h.path, options_.op_timeout);
      return;
    }
    // An uncertain create's znode, found by its owner.
    const std::string dir = LockPath(h.lock);
    auto children = h.session->Children(dir, options_.op_timeout);
    if (!children.ok()) return;
    for (const auto& c : *children) {
      if (c.starts_with(ContenderPrefix(h.owner))) {
        (void)h.session->Delete(dir + "/" + c, options_.op_timeout);
      }
    }
  }

  const ZookeeperUri uri_;
  const LockOptions options_;
  Clock* const clock_;
  zk::Ensemble ensemble_;
  // The owners' znodes and the reaper; last: its thread starts once the rest is made, and
  // stops before the rest is destroyed.
  zk::Leases leases_;
};

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenZookeeperBackend(std::string_view uri,
                                                          const LockOptions& options) {
  auto parsed = ParseZookeeperUri(uri);
  if (!parsed.ok()) return parsed.status();
  auto backend = std::make_unique<ZookeeperBackend>(std::move(parsed).value(), options);
  // Fail at open, with a clear message, when no member answers or the credentials are wrong.
  if (Status s = backend->Open(); !s.ok()) return s;
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit::lockclient
