// The sessions a ZooKeeper client keeps with one ensemble, and the ensemble's service id.
// Private to lockclient.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "zookeeper/session.h"
#include "zookeeper/uri.h"

namespace fencekit::lockclient::zk {

// One session per lease ttl, kept open (a connection and the C client's two threads each) and
// made again once the ensemble expired it; the service id learned by the first (read, or made
// on a new or wiped ensemble). Every call to the ensemble is bounded by `op_timeout`, a connect
// by `connect_timeout`. Thread safety: safe for concurrent use; no lock is held while the
// ensemble answers.
class Ensemble {
 public:
  Ensemble(ZookeeperUri uri, std::chrono::milliseconds op_timeout,
           std::chrono::milliseconds connect_timeout);

  const ZookeeperUri& uri() const { return uri_; }

  // The session for leases of `ttl`. With `lease`, kInvalidArgument when the ensemble grants a
  // shorter session than `ttl`: it would end the lease early.
  Result<std::shared_ptr<Session>> SessionFor(std::chrono::milliseconds ttl, bool lease);

  // The service id; empty until a session was opened.
  std::string service_id() const;

 private:
  // Reads the service id, or makes it on a new (or wiped) ensemble.
  Status LearnServiceId(Session& session);

  const ZookeeperUri uri_;
  const std::chrono::milliseconds op_timeout_;
  const std::chrono::milliseconds connect_timeout_;
  mutable Mutex mu_;
  // ttl in ms -> the session for leases of that ttl.
  std::map<std::int64_t, std::shared_ptr<Session>> sessions_ FENCEKIT_GUARDED_BY(mu_);
  std::string service_id_ FENCEKIT_GUARDED_BY(mu_);
};

// Makes the folders above `path` ("/a/b/c": /a, /a/b), persistent: a lock's folder keeps the
// token of its last release (its data).
Status MakeParents(Session& session, const std::string& path,
                   std::chrono::milliseconds op_timeout);

}  // namespace fencekit::lockclient::zk
