// RedisNodeSet: Redlock's independent Redis nodes, and the rounds that send one script call to
// several of them at once and gather their answers within a per-node timeout. It counts what
// each node answered, but decides nothing: what a round's votes mean is RedlockBackend's.
// Private to lockclient.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/lockclient/lock_client.h"
#include "redis/connection.h"

namespace fencekit::lockclient {

// One node's answer in a round.
struct Vote {
  enum State { kPending, kYes, kNo } state = kPending;
  Status status;  // for kNo: why (kBusy or kNotHeld: the node refused; else it failed)
  std::int64_t token = 0;
  std::chrono::milliseconds remaining{0};
  std::string owner;      // a check's answer: the holder, if any
  std::string service;    // the service id the node reported (grants, checks)
  bool released = false;  // a release's or extend's answer: this lease was already released
  bool taken = false;     // a release's or extend's answer: another owner holds the lock
  bool resent = false;    // the answer is to the call sent again after its connection broke
};

// A non-owning reference to a callable, so a round can take a lambda without allocating. It
// must not outlive the callable. Thread safety: as the callable's.
template <typename Signature>
class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  FunctionRef(const F& f)  // NOLINT: implicit by design, like a function pointer
      : object_(&f), call_([](const void* o, Args... args) -> R {
          return (*static_cast<const F*>(o))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  const void* object_;
  R (*call_)(const void*, Args...);
};

// Turns node i's reply (never an error reply) into its vote.
using VoteParser = FunctionRef<Vote(std::size_t, const redisReply*)>;

// Thread safety: safe for concurrent use; each round runs on the calling thread.
class RedisNodeSet {
 public:
  struct Options {
    // Each node has this long per round (far below the ttl, so a dead node is skipped fast).
    std::chrono::milliseconds node_timeout{50};
    // Ask the nodes one after another instead of all at once.
    bool sequential = false;
  };

  RedisNodeSet(std::vector<std::unique_ptr<RedisNode>> nodes, Options options);

  std::size_t size() const { return nodes_.size(); }
  RedisNode& node(std::size_t i) { return *nodes_[i]; }
  const RedisNode& node(std::size_t i) const { return *nodes_[i]; }

  // One round: the same script call to every node i with ask[i]. Returns once `need` of them
  // said yes or can no longer (with `stop_early`), once all answered, or at the node timeout
  // (then those still out are kNo with kUnavailable). Concurrent mode writes every request
  // first, then reads the replies as they come with poll(2), all on the calling thread;
  // sequential mode asks one node after another.
  std::vector<Vote> Round(int script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, const std::vector<bool>& ask,
                          int need, bool stop_early, VoteParser parse);

  std::vector<NodeMetrics> metrics() const;

 private:
  // Counters behind NodeMetrics.
  struct Counters {
    std::atomic<std::uint64_t> requests{0}, granted{0}, refused{0}, failed{0}, timed_out{0};
  };

  std::vector<std::unique_ptr<RedisNode>> nodes_;
  std::vector<Counters> counters_;  // one per node
  const Options options_;
};

}  // namespace fencekit::lockclient
