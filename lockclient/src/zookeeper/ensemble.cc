#include "zookeeper/ensemble.h"

#include <zookeeper/zookeeper.h>

#include <utility>

#include "fencekit/common/names.h"
#include "random_id.h"

namespace fencekit::lockclient::zk {

using std::chrono::milliseconds;

Ensemble::Ensemble(ZookeeperUri uri, milliseconds op_timeout, milliseconds connect_timeout)
    : uri_(std::move(uri)), op_timeout_(op_timeout), connect_timeout_(connect_timeout) {}

Result<std::shared_ptr<Session>> Ensemble::SessionFor(milliseconds ttl, bool lease) {
  std::shared_ptr<Session> session;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(ttl.count());
    if (it != sessions_.end() && it->second->alive()) session = it->second;
  }
  if (session == nullptr) {
    auto opened =
        Session::Open(uri_.hosts, ttl, connect_timeout_, uri_.user, uri_.password, uri_.shown);
    if (!opened.ok()) return opened.status();
    session = std::shared_ptr<Session>(std::move(opened).value());
    if (Status s = LearnServiceId(*session); !s.ok()) return s;
    MutexLock lock(mu_);
    sessions_[ttl.count()] = session;
  }
  if (lease && session->negotiated() < ttl) {
    return Status::InvalidArgument(
        "the ZooKeeper ensemble " + uri_.shown + " grants sessions of at most " +
        std::to_string(session->negotiated().count()) + "ms, below the ttl of " +
        std::to_string(ttl.count()) +
        "ms: the lease would end early; ask for a ttl the ensemble's minSessionTimeout and "
        "maxSessionTimeout allow (by default 2 and 20 tickTimes)");
  }
  return session;
}

std::string Ensemble::service_id() const {
  MutexLock lock(mu_);
  return service_id_;
}

Status Ensemble::LearnServiceId(Session& session) {
  const std::string path = uri_.prefix + "/service-id";
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto id = session.Get(path, op_timeout_);
    if (id.ok()) {
      if (!CheckServiceId(*id).ok()) {
        return Status::Unavailable("ZooKeeper " + uri_.shown + ": the znode " + path +
                                   " holds no usable service id");
      }
      MutexLock lock(mu_);
      service_id_ = *id;
      return Status::Ok();
    }
    if (!id.status().IsNotFound()) return id.status();
    auto random = RandomHex128();
    if (!random.ok()) return random.status();
    if (Status s = MakeParents(session, path, op_timeout_); !s.ok()) return s;
    auto made = session.Create(path, "zookeeper:" + *random, ZOO_PERSISTENT, op_timeout_);
    if (!made.ok() && !made.status().IsBusy()) return made.status();
  }
  return Status::Unavailable("ZooKeeper " + uri_.shown + ": the service id could not be read");
}

Status MakeParents(Session& session, const std::string& path, milliseconds op_timeout) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    auto made = session.Create(path.substr(0, slash), "", ZOO_PERSISTENT, op_timeout);
    if (!made.ok() && !made.status().IsBusy() && !made.status().IsNotFound()) {
      return made.status();
    }
  }
  return Status::Ok();
}

}  // namespace fencekit::lockclient::zk
