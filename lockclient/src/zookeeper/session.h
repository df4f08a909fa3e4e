// One ZooKeeper session through Debian's C client (libzookeeper-mt): connect, the calls the lock
// recipe makes, each bounded by a timeout, and watches of a znode's deletion. Private to
// lockclient; only this file's .cc includes <zookeeper/zookeeper.h>.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"

struct _zhandle;

namespace fencekit::lockclient::zk {

// A znode's creation zxid: the fencing token of the lock recipe.
using Zxid = std::int64_t;

// Thread safety: safe for concurrent use. Callbacks of the C client's own threads only touch
// state under mu_ (and the calls' own).
class Session {
 public:
  // Connects to `hosts` ("h1:p1,h2:p2") asking for a session timeout of `ttl`, waiting at most
  // `connect_timeout`; authenticates with the digest scheme when `user` is set. kUnavailable
  // when no member answers in time, kUnauthenticated when the credentials are refused.
  static Result<std::unique_ptr<Session>> Open(const std::string& hosts,
                                               std::chrono::milliseconds ttl,
                                               std::chrono::milliseconds connect_timeout,
                                               const std::string& user,
                                               const std::string& password,
                                               const std::string& shown);
  ~Session();  // closes the session: its ephemeral znodes go at once
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The session timeout the ensemble granted (within its min/max session timeouts).
  std::chrono::milliseconds negotiated() const { return negotiated_; }
  // False once the ensemble expired the session, or it has been disconnected longer than its
  // timeout (the ensemble has expired it by then, or cannot answer: a member behind the zxids
  // this session saw, as a wiped ensemble is, refuses it forever): its ephemeral znodes are
  // gone, and a new session is needed.
  bool alive() const;
  bool auth_failed() const;

  // Each call waits at most `timeout` for the answer; kUnavailable then (the outcome is unknown),
  // and on a lost connection. A ZooKeeper error other than those the call names is kInternal or
  // kUnavailable, quoting zerror().
  struct Created {
    std::string path;
    Zxid czxid = 0;
  };
  // kNotFound when the parent does not exist, kBusy when `path` does (a
  // sequential znode never does).
  Result<Created> Create(const std::string& path, const std::string& data, int flags,
                         std::chrono::milliseconds timeout);
  // Create, and Children of `dir` sent behind it without waiting for its reply: the ensemble
  // answers a session's requests in order, so the list includes the new znode, for one round
  // trip instead of two. The create's status when it failed; else the znode, and the list or
  // why it failed (`listed`).
  struct CreatedInLine {
    Created created;
    Status listed;
    std::vector<std::string> children;
  };
  Result<CreatedInLine> CreateThenList(const std::string& path, const std::string& data,
                                       int flags, const std::string& dir,
                                       std::chrono::milliseconds timeout);
  // The children's names; kNotFound when `path` does not exist.
  Result<std::vector<std::string>> Children(const std::string& path,
                                            std::chrono::milliseconds timeout);
  // The znode's czxid, nullopt when it does not exist. With `watch`, a deletion (or creation)
  // of `path` afterwards wakes WaitForChange.
  Result<std::optional<Zxid>> Exists(const std::string& path, bool watch,
                                     std::chrono::milliseconds timeout);
  Result<std::string> Get(const std::string& path, std::chrono::milliseconds timeout);
  // kNotFound when it does not exist.
  Status Delete(const std::string& path, std::chrono::milliseconds timeout);
  // Deletes `path` and sets `record`'s data to `data` in one transaction (one log entry):
  // kNotFound when `path` (or `record`) does not exist, and then neither changes.
  Status DeleteAndSet(const std::string& path, const std::string& record, const std::string& data,
                      std::chrono::milliseconds timeout);

  // Waits until a watched znode changed since `seen` (a value of changes()), the session
  // ended, or `until` (real time). Returns changes().
  std::uint64_t WaitForChange(std::uint64_t seen, std::chrono::steady_clock::time_point until);
  std::uint64_t changes() const;

  // Called by the C client's watcher (its own thread).
  void OnEvent(int type, int state);

 private:
  explicit Session(std::string shown) : shown_(std::move(shown)) {}
  // kUnavailable (or what the session's state says) naming `what`, for ZooKeeper's `rc`.
  Status Failed(int rc, const std::string& what) const;

  const std::string shown_;
  _zhandle* zh_ = nullptr;
  bool creator_acl_ = false;  // authenticated: znodes only this user may change
  std::chrono::milliseconds negotiated_{0};
  mutable Mutex mu_;
  CondVar changed_;
  bool connected_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point disconnected_at_ FENCEKIT_GUARDED_BY(mu_);
  bool expired_ FENCEKIT_GUARDED_BY(mu_) = false;
  bool auth_failed_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::uint64_t changes_ FENCEKIT_GUARDED_BY(mu_) = 0;
};

}  // namespace fencekit::lockclient::zk
