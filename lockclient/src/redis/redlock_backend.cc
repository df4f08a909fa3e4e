// Redlock: N independent Redis nodes; a majority decides. What this file decides: when a round's
// votes make a grant, an extension or a release, which token a grant carries, and how long it
// is valid. The rounds themselves are RedisNodeSet's; the scripts are redis_protocol's.
//
// Tokens: each node's counter is bumped by its acquire script; the client takes the maximum
// over the granting majority and writes it back to a majority before returning, so any later
// majority, which overlaps that one, counts past it.
#include <algorithm>
#include <map>
#include <random>

#include "lock_backend.h"
#include "endpoints.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"
#include "random_id.h"
#include "redis/node_set.h"
#include "redis/protocol.h"
#include "redis/seen_tokens.h"

namespace fencekit::lockclient {
namespace {

namespace rp = redis_protocol;
using std::chrono::milliseconds;

int Count(const std::vector<Vote>& votes, Vote::State s) {
  int n = 0;
  for (const auto& v : votes) n += v.state == s;
  return n;
}

// The service id that at least `need` of the votes in state `s` report; empty if none does.
std::string AgreedService(const std::vector<Vote>& votes, Vote::State s, int need) {
  std::map<std::string_view, int> count;
  for (const auto& v : votes) {
    if (v.state == s && !v.service.empty() && ++count[v.service] >= need) return v.service;
  }
  return "";
}

// A candidate service id, fresh for each use, so that a node that lost its data never gets
// an old id back.
Result<std::string> Candidate() {
  auto hex = RandomHex128();
  if (!hex.ok()) return hex.status();
  return "redlock:" + *hex;
}

// A vote carrying only a service id.
Vote IdVote(std::string id) {
  Vote v{Vote::kYes};
  v.service = std::move(id);
  return v;
}

// Thread safety: safe for concurrent use; each call runs its rounds on the calling thread.
class RedlockBackend final : public LockBackend {
 public:
  RedlockBackend(std::vector<std::unique_ptr<RedisNode>> nodes, const LockOptions& options,
                 std::string service)
      : nodes_(std::move(nodes), {.node_timeout = options.redlock_node_timeout,
                                  .sequential = options.redlock_sequential}),
        options_(options),
        clock_(options.clock != nullptr ? options.clock : Clock::Real()),
        service_(std::move(service)),
        quorum_(static_cast<int>(nodes_.size()) / 2 + 1),
        seen_(options.remembered_locks) {}

  // kUnavailable, naming the nodes, when fewer than a majority can be reached.
  Status Check() {
    int reachable = 0;
    std::string errors;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      // Only connects: a node that accepts but does not answer is found out by the rounds.
      Status s = nodes_.node(i).Check();
      if (s.ok()) {
        ++reachable;
      } else {
        errors += (errors.empty() ? "" : "; ") + s.message();
      }
    }
    if (reachable >= quorum_) return SyncServiceIds();
    return Status::Unavailable("only " + std::to_string(reachable) + " of " +
                               std::to_string(nodes_.size()) + " Redlock nodes of " + service_ +
                               " can be reached, fewer than a majority (" +
                               std::to_string(quorum_) + "): " + errors);
  }

  Result<Granted> TryAcquire(std::string_view lock, std::string_view owner, milliseconds ttl,
                             milliseconds* holder_remaining) override {
    const auto start = clock_->Now();
    const std::int64_t floor = seen_.Floor(lock);
    auto candidate = Candidate();
    if (!candidate.ok()) return candidate.status();
    const std::vector<bool> all(nodes_.size(), true);
    auto votes = nodes_.Round(
        rp::kAcquire, rp::AcquireKeys(lock), rp::AcquireArgs(owner, ttl, floor, *candidate), all,
        quorum_, /*stop_early=*/true, [&](std::size_t i, const redisReply* r) {
          auto a = rp::ParseAcquire(r, nodes_.node(i).service(), lock);
          if (!a.ok()) return Vote{Vote::kNo, a.status()};
          if (!a->granted) {
            return Vote{Vote::kNo,
                        Status::Busy(Subject(lock, nodes_.node(i).service()) + " is held"), 0,
                        a->holder_remaining};
          }
          Vote v{Vote::kYes, Status::Ok(), a->token};
          if (CheckServiceId(a->service).ok()) v.service = std::move(a->service);
          return v;
        });
    int yes = Count(votes, Vote::kYes);
    // The lease's service: the id that a majority of the nodes that granted report (the others
    // adopt it in the write-back round below).
    const std::string service = AgreedService(votes, Vote::kYes, yes / 2 + 1);
    // Validity as LockClient computes it: from the round's start, the ttl less the drift; a round
    // that took all of it leaves none (never a lease born expired).
    const auto elapsed = clock_->Now() - start;
    if (yes >= quorum_ && !service.empty() && elapsed < ttl - LeaseDrift(options_, ttl)) {
      std::int64_t token = 0;
      for (const auto& v : votes) {
        if (v.state == Vote::kYes) token = std::max(token, v.token);
      }
      auto t = FencingToken::FromInt(token);
      if (!t.ok()) return Status::Unavailable(service_ + " granted a bad token");
      // A majority must know the token before anyone uses it, and hold it as the lease's token
      // (for CheckToken) under the lease's service id. Granting nodes that reported this very
      // token and id already do. Only when they are fewer than a majority (counters out of step
      // after contention, or a node's data loss) does the write-back round ask the other
      // granting nodes, which answered a moment ago, to raise their counter, put the token in
      // their lock key and adopt the id.
      int know = 0;
      std::vector<bool> ask(nodes_.size(), false);
      for (std::size_t i = 0; i < votes.size(); ++i) {
        if (votes[i].state != Vote::kYes) continue;
        if (votes[i].token == token && votes[i].service == service) {
          ++know;
        } else {
          ask[i] = true;
        }
      }
      bool recorded = know >= quorum_;
      if (!recorded) {
        auto written =
            nodes_.Round(rp::kRaise, rp::RaiseKeys(lock), rp::RaiseArgs(token, owner, service), ask,
                         quorum_ - know, /*stop_early=*/false,
                         [](std::size_t, const redisReply*) { return Vote{Vote::kYes}; });
        recorded = know + Count(written, Vote::kYes) >= quorum_;
        if (!recorded) votes = written;
      }
      if (recorded) {
        seen_.Raise(lock, token);
        SetServiceId(service);
        return Granted{*t, service};
      }
    }
    // Failed: give back what was won, on every node, including those whose reply was lost.
    ReleaseEverywhere(lock, owner, /*remember=*/false, /*wait_all=*/true);
    int busy = 0;
    for (const auto& v : votes) {
      if (v.state == Vote::kNo && v.status.IsBusy()) {
        ++busy;
        *holder_remaining = std::max(*holder_remaining, v.remaining);
      }
    }
    std::string detail = Detail(votes);
    if (busy > 0) return Status::Busy(Subject(lock, service_) + " is held (" + detail + ")");
    if (yes >= quorum_ && service.empty()) {
      return Status::Unavailable(Subject(lock, service_) +
                                 ": a majority granted, but no majority of the granting nodes "
                                 "reported one service id (nodes lost their data, or belong to "
                                 "different sets); retry, or check the nodes (" +
                                 detail + ")");
    }
    if (yes >= quorum_ && elapsed >= ttl - LeaseDrift(options_, ttl)) {
      return Status::Unavailable(
          Subject(lock, service_) + ": a majority granted, but the round took " +
          std::to_string(std::chrono::duration_cast<milliseconds>(elapsed).count()) +
          "ms, which leaves no validity of the ttl " + std::to_string(ttl.count()) +
          "ms (less the drift); the lease was released (" + detail + ")");
    }
    if (yes >= quorum_) {
      return Status::Unavailable(Subject(lock, service_) +
                                 ": a majority granted, but the token could not be recorded (" +
                                 detail + ")");
    }
    return Status::Unavailable("no majority (" + std::to_string(quorum_) + " of " +
                               std::to_string(nodes_.size()) + ") for " + Subject(lock, service_) +
                               ": " + detail);
  }

  Status Extend(std::string_view lock, std::string_view owner, FencingToken,
                milliseconds ttl) override {
    const auto start = clock_->Now();
    auto votes = OwnerRound(rp::kExtend, lock, owner, ttl, "extend", /*stop_early=*/true);
    if (Count(votes, Vote::kYes) >= quorum_ && clock_->Now() - start < ttl) return Status::Ok();
    if (CountReleased(votes) >= quorum_) return AlreadyReleased("extend", lock, service_);
    int not_held = 0;
    for (const auto& v : votes) not_held += v.state == Vote::kNo && v.status.IsNotHeld();
    std::string example = Example(votes);
    std::string msg = "cannot extend " + Subject(lock, service_) + ": no majority (" +
                      Detail(votes) + ")" + (example.empty() ? "" : "; for example: " + example);
    if (not_held > static_cast<int>(nodes_.size()) - quorum_) return Status::NotHeld(msg);
    return Status::Unavailable(msg);
  }

  Status Release(std::string_view lock, std::string_view owner, FencingToken) override {
    auto votes = ReleaseEverywhere(lock, owner, /*remember=*/true, /*wait_all=*/false);
    int yes = 0, not_held = 0;
    for (auto& v : votes) {
      // A release sent again after its connection broke finds its own first call done.
      if (v.state == Vote::kNo && v.released && v.resent) v = Vote{Vote::kYes};
      yes += v.state == Vote::kYes;
      not_held += v.state == Vote::kNo && v.status.IsNotHeld();
    }
    if (yes >= quorum_) return Status::Ok();
    if (CountReleased(votes) >= quorum_) {
      return Status::NotHeld(AlreadyReleased("release", lock, service_).message() + " (" +
                             Detail(votes) + ")");
    }
    // A leftover key on a minority of nodes does not make a lease: say it was lost.
    if (not_held > static_cast<int>(nodes_.size()) - quorum_) {
      return Status::NotHeld("a majority of nodes no longer hold the lease (" + Detail(votes) +
                             "); for example: " + Example(votes));
    }
    if (yes > 0) return Status::Ok();  // the nodes that did not answer expire the key
    return Status::Unavailable("cannot release " + Subject(lock, service_) + ": " + Detail(votes));
  }

  Result<LockInfo> Inspect(std::string_view lock) override;
  Result<TokenCheck> CheckToken(std::string_view lock, FencingToken token) override;

  std::string service_id() const override {
    MutexLock l(id_mu_);
    return service_id_;
  }

  void WaitForRelease(std::string_view lock, milliseconds max_wait) override {
    // Redlock has no wake-up signal: retry after a random delay, so that clients that split
    // the votes do not retry in lockstep.
    thread_local std::minstd_rand rng(std::random_device{}());
    auto cap = std::max<long long>(1, std::min<long long>(max_wait.count(), 50));
    clock_->SleepFor(milliseconds(1 + static_cast<long long>(rng() % cap)));
  }

  const std::string& service() const override { return service_; }
  std::vector<NodeMetrics> node_metrics() const override { return nodes_.metrics(); }

 private:
  // "granted by a, b; refused by c; failed or timed out: d (why)".
  std::string Detail(const std::vector<Vote>& votes) const;

  // `remember`: as rp::OwnerArgs.
  std::vector<Vote> OwnerRound(rp::Script script, std::string_view lock, std::string_view owner,
                               milliseconds ttl, std::string_view what, bool stop_early,
                               bool remember = true) {
    return nodes_.Round(script, rp::OwnerKeys(lock, script == rp::kRelease),
                        rp::OwnerArgs(owner, ttl, remember), std::vector<bool>(nodes_.size(), true),
                        quorum_, stop_early, [&](std::size_t i, const redisReply* r) {
                          Status s = rp::ParseOwnerChecked(r, nodes_.node(i).service(), lock, what);
                          Vote v{s.ok() ? Vote::kYes : Vote::kNo, s};
                          v.released = rp::SaysAlreadyReleased(r);
                          v.taken = rp::SaysHeldByAnother(r);
                          return v;
                        });
  }

  // Sends the release to every node; `remember` as rp::OwnerArgs. With `wait_all` false it
  // returns once a majority answered (replies still due are read before the connection's next
  // use); a failed acquire waits for all, so that what it won is given back before it retries.
  std::vector<Vote> ReleaseEverywhere(std::string_view lock, std::string_view owner, bool remember,
                                      bool wait_all) {
    return OwnerRound(rp::kRelease, lock, owner, options_.ttl, "release", !wait_all, remember);
  }

  // The most telling refusal of an owner-checked round: a node where another owner holds the
  // lock (its key on the other nodes may have expired at another moment), else the first.
  static std::string Example(const std::vector<Vote>& votes) {
    const Vote* example = nullptr;
    for (const auto& v : votes) {
      if (v.state != Vote::kNo || !v.status.IsNotHeld()) continue;
      if (example == nullptr || (v.taken && !example->taken)) example = &v;
    }
    return example != nullptr ? example->status.message() : "";
  }

  // The nodes that said this lease was already released.
  static int CountReleased(const std::vector<Vote>& votes) {
    int n = 0;
    for (const auto& v : votes) n += v.state == Vote::kNo && v.released;
    return n;
  }

  void SetServiceId(const std::string& id) {
    MutexLock l(id_mu_);
    if (service_id_ != id) service_id_ = id;
  }

  // At open: reads each node's service id, making one (one candidate for all) where there is
  // none; nodes that disagree with a majority adopt its id, so that a node that lost its data
  // does not keep grants from agreeing. Nodes that fail are skipped.
  Status SyncServiceIds();

  RedisNodeSet nodes_;
  const LockOptions options_;
  Clock* const clock_;
  const std::string service_;
  const int quorum_;
  SeenTokens seen_;
  mutable Mutex id_mu_;
  std::string service_id_ FENCEKIT_GUARDED_BY(id_mu_);  // empty while no majority agrees
};

Status RedlockBackend::SyncServiceIds() {
  auto candidate = Candidate();
  if (!candidate.ok()) return candidate.status();
  std::vector<Vote> ids(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    RedisNode& node = nodes_.node(i);
    auto reply = node.Eval(rp::kServiceId, {rp::ServiceKey()}, {*candidate, ""}, "");
    if (!reply.ok()) continue;
    auto id = rp::ParseServiceId(reply->get(), node.service());
    if (id.ok() && CheckServiceId(*id).ok()) ids[i] = IdVote(*id);
  }
  const std::string majority = AgreedService(ids, Vote::kYes, quorum_);
  if (majority.empty()) return Status::Ok();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (ids[i].state != Vote::kYes || ids[i].service == majority) continue;
    // Only if the node still has the id it reported: a change meanwhile wins.
    (void)nodes_.node(i).Eval(rp::kServiceId, {rp::ServiceKey()}, {majority, ids[i].service}, "");
  }
  SetServiceId(majority);
  return Status::Ok();
}

Result<TokenCheck> RedlockBackend::CheckToken(std::string_view lock, FencingToken token) {
  // All nodes at once; done once a majority confirmed the token, or no longer can.
  auto votes = nodes_.Round(
      rp::kCheck, rp::CheckKeys(lock), {}, std::vector<bool>(nodes_.size(), true), quorum_,
      /*stop_early=*/true, [&](std::size_t i, const redisReply* r) {
        auto c = rp::ParseCheck(r, nodes_.node(i).service(), lock);
        if (!c.ok()) return Vote{Vote::kNo, c.status()};
        const bool current = c->holder == token;
        Vote v{current ? Vote::kYes : Vote::kNo,
               current ? Status::Ok() : Status::NotHeld("the node holds another token or none")};
        v.token = c->holder ? c->holder->value() : 0;
        v.owner = std::move(c->owner);
        if (CheckServiceId(c->service).ok()) v.service = std::move(c->service);
        return v;
      });
  TokenCheck check;
  check.service = AgreedService(votes, Vote::kYes, quorum_);
  if (!check.service.empty()) {
    check.current = true;
    check.holder = token;
    return check;
  }
  std::vector<Vote> answered;  // each answering node's id
  std::map<std::string, int> owners;
  for (const auto& v : votes) {
    if (v.state == Vote::kYes || (v.state == Vote::kNo && v.status.IsNotHeld())) {
      answered.push_back(IdVote(v.service));
      if (!v.owner.empty()) ++owners[v.owner];
    }
  }
  if (static_cast<int>(answered.size()) < quorum_) {
    return Status::Unavailable("cannot check a token of " + Subject(lock, service_) +
                               ": fewer than a majority of the nodes answered (" + Detail(votes) +
                               ")");
  }
  // Not current. The holder: the owner a majority holds, with the highest token they report.
  for (const auto& v : votes) {
    if (v.owner.empty() || owners[v.owner] < quorum_) continue;
    auto t = FencingToken::FromInt(v.token);
    if (t.ok() && (!check.holder || *t > *check.holder)) check.holder = *t;
  }
  check.service = AgreedService(answered, Vote::kYes, quorum_);
  if (check.service.empty()) check.service = service_id();
  return check;
}

Result<LockInfo> RedlockBackend::Inspect(std::string_view lock) {
  std::vector<LockInfo> infos;
  std::string errors;
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    // Inspect is rare and not on a lease's path: one node after another is enough.
    RedisNode& node = nodes_.node(n);
    auto reply = node.Eval(rp::kInspect, rp::InspectKeys(lock), {}, lock);
    auto i = reply.ok() ? rp::ParseInspect(reply->get(), node.service(), lock)
                        : Result<LockInfo>(reply.status());
    if (i.ok()) {
      infos.push_back(*i);
    } else {
      errors += node.address() + ": " + i.status().message() + "; ";
    }
  }
  if (static_cast<int>(infos.size()) < quorum_) {
    return Status::Unavailable("cannot inspect " + Subject(lock, service_) + ": " + errors);
  }
  LockInfo out;
  out.lock = std::string(lock);
  std::map<std::string, int> owners;
  for (const auto& i : infos) {
    if (i.held) ++owners[i.owner];
    if (i.last_token && (!out.last_token || *i.last_token > *out.last_token)) {
      out.last_token = i.last_token;
    }
  }
  // Held while a majority holds it: the quorum-th longest remaining time among the holders.
  std::vector<milliseconds> remaining;
  for (const auto& i : infos) {
    if (i.held && owners[i.owner] >= quorum_) {
      if (!out.held) {
        out = LockInfo{std::string(lock), true, i.owner, i.token, i.remaining, out.last_token};
      }
      out.token = std::max(*out.token, *i.token);
      remaining.push_back(i.remaining);
    }
  }
  if (out.held) {
    std::sort(remaining.rbegin(), remaining.rend());
    out.remaining = remaining[static_cast<std::size_t>(quorum_ - 1)];
  }
  return out;
}

std::string RedlockBackend::Detail(const std::vector<Vote>& votes) const {
  std::string granted, refused, failed, pending;
  for (std::size_t i = 0; i < votes.size(); ++i) {
    const std::string& a = nodes_.node(i).address();
    switch (votes[i].state) {
      case Vote::kYes:
        granted += (granted.empty() ? "" : ", ") + a;
        break;
      case Vote::kPending:
        pending += (pending.empty() ? "" : ", ") + a;
        break;
      case Vote::kNo:
        if (votes[i].status.IsBusy() || votes[i].status.IsNotHeld()) {
          refused += (refused.empty() ? "" : ", ") + a;
        } else {
          failed += (failed.empty() ? "" : ", ") + a + " (" + votes[i].status.message() + ")";
        }
        break;
    }
  }
  std::string out;
  auto add = [&](const char* what, const std::string& list) {
    if (list.empty()) return;
    if (!out.empty()) out += "; ";
    out += what + list;
  };
  add("granted by ", granted);
  add("refused by ", refused);
  add("failed or timed out: ", failed);
  add("not asked or no answer awaited: ", pending);
  return out;
}

}  // namespace

Result<std::unique_ptr<LockBackend>> OpenRedlockBackend(std::string_view uri,
                                                        const LockOptions& options) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + std::string(uri) + "\" is invalid: " +
                                   std::string(why) + "; use redlock://h1:p1,h2:p2,h3:p3");
  };
  auto endpoints = ParseEndpoints(uri.substr(std::string_view("redlock://").size()));
  if (!endpoints.ok()) return bad(endpoints.status().message());
  if (endpoints->size() < 3) return bad("Redlock needs at least 3 nodes");
  std::vector<std::unique_ptr<RedisNode>> nodes;
  for (Endpoint& e : *endpoints) {
    nodes.push_back(std::make_unique<RedisNode>(
        RedisNode::Options{
            .endpoint = std::move(e), .op_timeout = options.redlock_node_timeout, .pool_size = 2},
        rp::Scripts()));
  }
  auto backend = std::make_unique<RedlockBackend>(std::move(nodes), options, std::string(uri));
  // Fail at open, with a clear message, when no majority of the nodes can be reached.
  if (Status s = backend->Check(); !s.ok()) return s;
  return std::unique_ptr<LockBackend>(std::move(backend));
}

}  // namespace fencekit::lockclient
