#include "zookeeper/session.h"

#include <zookeeper/zookeeper.h>

#include <mutex>

namespace fencekit::lockclient::zk {
namespace {

// One call's answer, shared by the waiting caller and the C client's completion thread: a
// caller that gave up leaves it to the completion, which the C client always calls once (with
// ZCLOSING when the session closes first).
struct Call {
  Mutex mu;
  CondVar done_cv;
  bool done FENCEKIT_GUARDED_BY(mu) = false;
  int rc FENCEKIT_GUARDED_BY(mu) = ZOK;
  std::string text FENCEKIT_GUARDED_BY(mu);
  std::optional<Zxid> czxid FENCEKIT_GUARDED_BY(mu);
  std::vector<std::string> children FENCEKIT_GUARDED_BY(mu);
  // A multi's operations and results: the C client reads and writes them until it completes.
  std::vector<std::string> paths;
  std::string payload;
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
};
using CallRef = std::shared_ptr<Call>;

// The completion's `data`: a heap copy of the reference, freed by the completion.
const void* Handle(const CallRef& call) { return new CallRef(call); }
CallRef Take(const void* data) {
  auto* ref = static_cast<CallRef*>(const_cast<void*>(data));
  CallRef call = std::move(*ref);
  delete ref;
  return call;
}
void Finish(Call& call) FENCEKIT_REQUIRES(call.mu) {
  call.done = true;
  call.done_cv.NotifyAll();
}

void OnString(int rc, const char* path, const Stat* stat, const void* data) {
  CallRef call = Take(data);
  MutexLock lock(call->mu);
  call->rc = rc;
  if (rc == ZOK && path != nullptr) call->text = path;
  if (rc == ZOK && stat != nullptr) call->czxid = stat->czxid;
  Finish(*call);
}
void OnStrings(int rc, const String_vector* strings, const void* data) {
  CallRef call = Take(data);
  MutexLock lock(call->mu);
  call->rc = rc;
  if (rc == ZOK && strings != nullptr) {
    for (int i = 0; i < strings->count; ++i) call->children.emplace_back(strings->data[i]);
  }
  Finish(*call);
}
void OnStat(int rc, const Stat* stat, const void* data) {
  CallRef call = Take(data);
  MutexLock lock(call->mu);
  call->rc = rc;
  if (rc == ZOK && stat != nullptr) call->czxid = stat->czxid;
  Finish(*call);
}
void OnData(int rc, const char* value, int length, const Stat*, const void* data) {
  CallRef call = Take(data);
  MutexLock lock(call->mu);
  call->rc = rc;
  if (rc == ZOK && value != nullptr && length > 0) {
    call->text.assign(value, static_cast<std::size_t>(length));
  }
  Finish(*call);
}
void OnVoid(int rc, const void* data) {
  CallRef call = Take(data);
  MutexLock lock(call->mu);
  call->rc = rc;
  Finish(*call);
}

void OnWatch(zhandle_t*, int type, int state, const char*, void* context) {
  static_cast<Session*>(context)->OnEvent(type, state);
}

// The C client logs connection attempts and losses on stderr; the statuses say what failed.
void Quiet(const char*) {}

// Waits for `call` until `timeout`: its rc, or ZOPERATIONTIMEOUT.
int Await(Call& call, int started, std::chrono::milliseconds timeout) {
  if (started != ZOK) {
    // Not sent: the C client calls no completion, so the handle is ours to free (the caller
    // does, below).
    return started;
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(call.mu);
  while (!call.done) {
    if (!call.done_cv.WaitUntil(call.mu, until) && !call.done) return ZOPERATIONTIMEOUT;
  }
  return call.rc;
}

// Starts an async call: `start(data)` returns the C client's rc; when it is not ZOK the
// completion will never run, so the handle is freed here.
template <class Start>
int Run(const CallRef& call, std::chrono::milliseconds timeout, Start start) {
  const void* data = Handle(call);
  const int started = start(data);
  if (started != ZOK) Take(data);
  return Await(*call, started, timeout);
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Open(const std::string& hosts,
                                               std::chrono::milliseconds ttl,
                                               std::chrono::milliseconds connect_timeout,
                                               const std::string& user,
                                               const std::string& password,
                                               const std::string& shown) {
  static std::once_flag quiet;
  std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
  std::unique_ptr<Session> session(new Session(shown));
  session->zh_ = zookeeper_init2(hosts.c_str(), OnWatch, static_cast<int>(ttl.count()), nullptr,
                                 session.get(), 0, Quiet);
  if (session->zh_ == nullptr) {
    return Status::Unavailable("cannot start a ZooKeeper session with " + shown + ": " +
                               std::string(std::strerror(errno)));
  }
  const auto until = std::chrono::steady_clock::now() + connect_timeout;
  {
    MutexLock lock(session->mu_);
    while (!session->connected_ && !session->expired_) {
      if (!session->changed_.WaitUntil(session->mu_, until) && !session->connected_) break;
    }
    if (!session->connected_) {
      return Status::Unavailable("no member of the ZooKeeper ensemble " + shown +
                                 " answered within " + std::to_string(connect_timeout.count()) +
                                 "ms");
    }
  }
  session->negotiated_ = std::chrono::milliseconds(zoo_recv_timeout(session->zh_));
  if (!user.empty()) {
    const std::string credentials = user + ":" + password;
    auto call = std::make_shared<Call>();
    const int rc = Run(call, connect_timeout, [&](const void* data) {
      return zoo_add_auth(session->zh_, "digest", credentials.data(),
                          static_cast<int>(credentials.size()), OnVoid, data);
    });
    if (rc == ZAUTHFAILED || session->auth_failed()) {
      return Status::Unauthenticated("the ZooKeeper ensemble " + shown +
                                     " refused the credentials of user \"" + user + "\"");
    }
    if (rc != ZOK) return session->Failed(rc, "authenticating");
    session->creator_acl_ = true;
  }
  return session;
}

Session::~Session() {
  if (zh_ != nullptr) zookeeper_close(zh_);
}

bool Session::alive() const {
  MutexLock lock(mu_);
  if (expired_ || auth_failed_) return false;
  return connected_ || std::chrono::steady_clock::now() - disconnected_at_ <= negotiated_;
}

bool Session::auth_failed() const {
  MutexLock lock(mu_);
  return auth_failed_;
}

void Session::OnEvent(int type, int state) {
  MutexLock lock(mu_);
  if (type == ZOO_SESSION_EVENT) {
    if (state == ZOO_CONNECTED_STATE) connected_ = true;
    if (state == ZOO_CONNECTING_STATE && connected_) {
      connected_ = false;
      disconnected_at_ = std::chrono::steady_clock::now();
    }
    if (state == ZOO_EXPIRED_SESSION_STATE) expired_ = true;
    if (state == ZOO_AUTH_FAILED_STATE) auth_failed_ = true;
  }
  ++changes_;
  changed_.NotifyAll();
}

std::uint64_t Session::changes() const {
  MutexLock lock(mu_);
  return changes_;
}

std::uint64_t Session::WaitForChange(std::uint64_t seen,
                                     std::chrono::steady_clock::time_point until) {
  MutexLock lock(mu_);
  while (changes_ == seen && !expired_) {
    if (!changed_.WaitUntil(mu_, until)) break;
  }
  return changes_;
}

Status Session::Failed(int rc, const std::string& what) const {
  const std::string start = "ZooKeeper " + shown_ + ", " + what + ": ";
  if (rc == ZOPERATIONTIMEOUT) {
    return Status::Unavailable(start + "no answer in time (the outcome is unknown)");
  }
  if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) {
    return Status::Unavailable(start + "the session expired");
  }
  if (rc == ZNOAUTH) return Status::PermissionDenied(start + "not allowed (" + zerror(rc) + ")");
  if (rc == ZCONNECTIONLOSS || rc == ZCLOSING) {
    return Status::Unavailable(start + "the connection was lost (the outcome is unknown)");
  }
  return Status::Unavailable(start + zerror(rc));
}

Result<Session::Created> Session::Create(const std::string& path, const std::string& data,
                                         int flags, std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                        creator_acl_ ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE, flags,
                        OnString, handle);
  });
  if (rc == ZNONODE) return Status::NotFound(path);
  if (rc == ZNODEEXISTS) return Status::Busy(path);
  if (rc != ZOK) return Failed(rc, "creating " + path);
  MutexLock lock(call->mu);
  return Created{call->text, call->czxid.value_or(0)};
}

Result<Session::CreatedInLine> Session::CreateThenList(const std::string& path,
                                                       const std::string& data, int flags,
                                                       const std::string& dir,
                                                       std::chrono::milliseconds timeout) {
  auto made = std::make_shared<Call>();
  auto listed = std::make_shared<Call>();
  const void* made_handle = Handle(made);
  const int create_started =
      zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                   creator_acl_ ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE, flags, OnString,
                   made_handle);
  if (create_started != ZOK) {
    Take(made_handle);
    return Failed(create_started, "creating " + path);
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  const void* list_handle = Handle(listed);
  const int list_started = zoo_aget_children(zh_, dir.c_str(), 0, OnStrings, list_handle);
  if (list_started != ZOK) Take(list_handle);
  const int created = Await(*made, ZOK, timeout);
  if (created == ZNONODE) return Status::NotFound(path);
  if (created != ZOK) return Failed(created, "creating " + path);
  CreatedInLine out;
  {
    MutexLock lock(made->mu);
    out.created = Created{made->text, made->czxid.value_or(0)};
  }
  const auto left = std::max(std::chrono::milliseconds(0),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 until - std::chrono::steady_clock::now()));
  const int rc = Await(*listed, list_started, left);
  if (rc != ZOK) {
    out.listed = rc == ZNONODE ? Status::NotFound(dir) : Failed(rc, "listing " + dir);
    return out;
  }
  MutexLock lock(listed->mu);
  out.children = std::move(listed->children);
  return out;
}

Result<std::vector<std::string>> Session::Children(const std::string& path,
                                                   std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_aget_children(zh_, path.c_str(), 0, OnStrings, handle);
  });
  if (rc == ZNONODE) return Status::NotFound(path);
  if (rc != ZOK) return Failed(rc, "listing " + path);
  MutexLock lock(call->mu);
  return std::move(call->children);
}

Result<std::optional<Zxid>> Session::Exists(const std::string& path, bool watch,
                                            std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_aexists(zh_, path.c_str(), watch ? 1 : 0, OnStat, handle);
  });
  if (rc == ZNONODE) return std::optional<Zxid>();
  if (rc != ZOK) return Failed(rc, "reading " + path);
  MutexLock lock(call->mu);
  return call->czxid;
}

Result<std::string> Session::Get(const std::string& path, std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_aget(zh_, path.c_str(), 0, OnData, handle);
  });
  if (rc == ZNONODE) return Status::NotFound(path);
  if (rc != ZOK) return Failed(rc, "reading " + path);
  MutexLock lock(call->mu);
  return call->text;
}

Status Session::Delete(const std::string& path, std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_adelete(zh_, path.c_str(), -1, OnVoid, handle);
  });
  if (rc == ZNONODE) return Status::NotFound(path);
  if (rc != ZOK) return Failed(rc, "deleting " + path);
  return Status::Ok();
}

Status Session::DeleteAndSet(const std::string& path, const std::string& record,
                             const std::string& data, std::chrono::milliseconds timeout) {
  auto call = std::make_shared<Call>();
  call->paths = {path, record};
  call->payload = data;
  zoo_delete_op_init(&call->ops[0], call->paths[0].c_str(), -1);
  zoo_set_op_init(&call->ops[1], call->paths[1].c_str(), call->payload.data(),
                  static_cast<int>(call->payload.size()), -1, nullptr);
  const int rc = Run(call, timeout, [&](const void* handle) {
    return zoo_amulti(zh_, 2, call->ops, call->results, OnVoid, handle);
  });
  if (rc == ZNONODE) return Status::NotFound(path);
  if (rc != ZOK) return Failed(rc, "deleting " + path);
  return Status::Ok();
}

}  // namespace fencekit::lockclient::zk
