// RedisNode: the connections to one Redis server and the script calls sent over them. It knows
// how to reach a node (timeouts, reconnecting, a pool) and how to run a Lua script on it
// (EVALSHA, falling back to EVAL), not what the scripts mean. Private to lockclient.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "endpoints.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"

namespace fencekit::lockclient {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

struct RedisContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using RedisContext = std::unique_ptr<redisContext, RedisContextDeleter>;

// Thread safety: safe for concurrent use; each connection is used by one caller at a time.
class RedisNode {
 public:
  struct Options {
    Endpoint endpoint;
    int db = 0;
    std::string password;  // empty: no AUTH
    // Connect, send and reply each have this long.
    std::chrono::milliseconds op_timeout{1'000};
    // Idle connections kept (at least 1).
    int pool_size = 4;
  };

  // `scripts`: the Lua scripts callers name by index. Not owned; must outlive the node.
  RedisNode(Options options, std::span<const char* const> scripts);
  RedisNode(const RedisNode&) = delete;
  RedisNode& operator=(const RedisNode&) = delete;

  // "redis://host:port/db", for messages.
  const std::string& service() const { return service_; }
  // "host:port", for per-node messages.
  const std::string& address() const { return address_; }

  // Connects once now and keeps the connection. kUnavailable when the node cannot be reached
  // or refuses the password; kInvalidArgument when it has no such database.
  Status Check();

  // Runs script `script` and waits for its reply. Retries once on a fresh connection when a
  // pooled one turns out to be broken (e.g. Redis restarted), so scripts must be harmless to
  // repeat. kUnavailable when unreachable, on no reply, or on an error reply (naming `lock`).
  // *sends (if given) counts the calls sent that may have run: above 1, the reply is the
  // retry's, and the first call may have run before its connection broke.
  Result<RedisReply> Eval(int script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, std::string_view lock,
                          int* sends = nullptr);

  // BLPOP on `key` for up to `max_wait` (the socket timeout is stretched to outlast it). Errors
  // are ignored: the caller looks at the lock again either way.
  void BlockingPop(const std::string& key, std::chrono::milliseconds max_wait);

  // --- For callers that pipeline one request to several nodes themselves (Redlock) ---

  // A connection from the pool (pooled = true) or a new one. A pooled connection may still owe
  // replies to requests whose answers nobody waited for (a Redlock round that ended early):
  // they are read and dropped first.
  struct Conn {
    RedisContext c;
    bool pooled = false;
  };
  Result<Conn> Take();
  // Returns a connection to the pool; `owed`: replies still to come for requests sent on it.
  void Give(RedisContext c, int owed = 0);
  // Drops every pooled connection (after one turned out broken, e.g. Redis restarted).
  void DropIdle();
  // Queues a script call in c's output buffer: EVALSHA, or EVAL while the SHA is unknown.
  // Returns whether it was EVAL (then LearnSha after the reply).
  bool Append(redisContext* c, int script, const std::vector<std::string>& keys,
              const std::vector<std::string>& args);
  // True for the error a server gives when it does not know a script's SHA (it restarted, or
  // SCRIPT FLUSH); the SHA is forgotten and the caller sends the script again (as EVAL).
  bool IsNoScript(const redisReply* r, int script);
  // Loads the script on `c` to learn its SHA, for EVALSHA from now on.
  void LearnSha(redisContext* c, int script);
  // The Status for an error reply to a request about `lock`.
  Status Refused(const redisReply* r, std::string_view lock) const;

 private:
  struct Idle {
    RedisContext c;
    int owed = 0;
  };

  const Options options_;
  const std::span<const char* const> scripts_;
  const std::string service_;
  const std::string address_;

  Mutex pool_mu_;
  std::vector<Idle> idle_ FENCEKIT_GUARDED_BY(pool_mu_);
  std::vector<std::string> shas_
      FENCEKIT_GUARDED_BY(pool_mu_);  // one per script; empty when unknown
};

}  // namespace fencekit::lockclient
