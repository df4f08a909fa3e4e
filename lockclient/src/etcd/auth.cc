// The auth token of an etcd user: got from /v3/auth/authenticate, sent with every call, renewed
// once when etcd no longer accepts it; and what an etcd refusal means for the caller.
#include <boost/json/serialize.hpp>

#include "etcd/gateway.h"
#include "fencekit/common/mutex.h"

namespace fencekit::lockclient::etcd {
namespace {

namespace json = boost::json;

constexpr std::size_t kMaxTokenBytes = 1024;

// A token that can travel in a header as it is.
bool UsableToken(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  return std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

Status Gateway::Refused(const Refusal& r) const {
  const std::string at = "etcd at " + r.where;
  const std::string user = "user \"" + access_.user + "\"";
  if (RefusedForAuth(r)) {
    if (access_.user.empty()) {
      return Status::Unauthenticated(at + " wants authentication (" + r.message +
                                     "); give a user in the URI: etcd://user:password@host:port");
    }
    return Status::Unauthenticated(at + " did not accept the auth token of " + user + " (" +
                                   r.message + ") even just after authenticating");
  }
  if (r.code == kGrpcPermissionDenied) {
    // With client certificates, etcd's gateway passes a call without a token on as made by
    // the user its own certificate names: no permission, rather than "authenticate first".
    if (access_.user.empty()) {
      return Status::PermissionDenied(at + " refused a client without a user: " + r.message +
                                      "; if etcd has authentication on, give a user in the URI: "
                                      "etcd://user:password@host:port");
    }
    return Status::PermissionDenied(at + " refused " + user + ": " + r.message);
  }
  std::string full = at + " answered: " + r.message;
  const bool too_large = r.message.find("larger than max") != std::string::npos ||
                         r.message.find("too large") != std::string::npos;
  if ((r.code == kGrpcResourceExhausted || r.code == kGrpcInvalidArgument) && too_large) {
    // A request over etcd's size limits: nothing was written, and sending it again cannot help.
    return Status::InvalidArgument(full +
                                   " (the request is larger than etcd takes: nothing was "
                                   "written; use smaller keys or values)");
  }
  if (r.code == kGrpcNotFound) return Status::NotFound(full);
  if (r.code == kGrpcInvalidArgument) return Status::InvalidArgument(full);
  return Status::Unavailable(full);
}

bool Gateway::RefusedForAuth(const Refusal& r) {
  // "invalid auth token" (expired, or etcd restarted); "user name is empty" (no token sent).
  return r.code == kGrpcUnauthenticated ||
         (r.code == kGrpcInvalidArgument &&
          r.message.find("user name is empty") != std::string::npos);
}

bool Gateway::TokenRefused(const Refusal& r) const {
  return !access_.user.empty() && RefusedForAuth(r);
}

Result<std::string> Gateway::Token() {
  if (access_.user.empty()) return std::string();
  {
    MutexLock lock(mu_);
    if (authenticated_) return token_;
  }
  return Renew("");
}

Result<std::string> Gateway::Renew(const std::string& refused) {
  MutexLock one_at_a_time(auth_mu_);
  {
    MutexLock lock(mu_);
    if (authenticated_ && token_ != refused) return token_;
  }
  auto token = Authenticate();
  if (!token.ok()) return token.status();
  MutexLock lock(mu_);
  token_ = *token;
  authenticated_ = true;
  return token;
}

Result<std::string> Gateway::Authenticate() {
  json::object body{{"name", access_.user}, {"password", access_.password}};
  Refusal refusal;
  auto reply = Send("/v3/auth/authenticate", json::serialize(body), "", nullptr, &refusal);
  if (reply.ok()) {
    std::string token = String(*reply, "token");
    if (!UsableToken(token)) {
      return Status::Unavailable("etcd sent user \"" + access_.user +
                                 "\" an auth token that cannot be used (empty, over 1024 bytes "
                                 "or not printable ASCII)");
    }
    return token;
  }
  // As etcd's own client does: with authentication off, calls need no token.
  if (refusal.code == kGrpcFailedPrecondition) return std::string();
  if (refusal.code == kGrpcInvalidArgument) {
    return Status::Unauthenticated("etcd at " + refusal.where + " refused user \"" + access_.user +
                                   "\": " + refusal.message +
                                   "; check the user name and password in the lock service URI");
  }
  return reply.status();
}

}  // namespace fencekit::lockclient::etcd
