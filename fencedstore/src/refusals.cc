#include "refusals.h"

#include <chrono>
#include <string>

#include "fencekit/fencedstore/refusal.h"

namespace fencekit::fencedstore {
namespace {

std::string Quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

// For a batch: which write refused it, and that nothing of it was applied.
std::string InBatch(const Pending& p) {
  if (p.writes.size() == 1) return {};
  const WriteRequest& w = p.writes[p.culprit];
  return "the batch of " + std::to_string(p.writes.size()) +
         " writes was refused, none applied: write " + std::to_string(p.culprit) + " (" +
         (w.kind == WriteRequest::Kind::kPut ? "put" : "delete") + " of key " + Quoted(w.key) +
         ") was refused: ";
}

}  // namespace

bool Verified(const Pending& p) {
  return p.verdict != nullptr && p.verdict->ok() && (*p.verdict)->current;
}

Status ResolveService(const Pending& p, std::string_view* service) {
  *service = p.grant().service;
  if (!Verified(p)) return Status::Ok();
  // Under verify only the lock service names the service a fence binds to: a verdict without
  // one binds none, whatever the write claims.
  const std::string& confirmed = (*p.verdict)->service;
  if (confirmed.empty()) {
    *service = {};
    return Status::Ok();
  }
  if (!service->empty() && *service != confirmed) {
    return Status::WrongService("the token was confirmed by lock service " + Quoted(confirmed) +
                                ", but the write names " + Quoted(*service) +
                                "; send the service of the lease that holds the token");
  }
  *service = confirmed;
  return Status::Ok();
}

Status StaleTokenStatus(const Pending& p, std::int64_t highest, bool strict) {
  const WriteRequest& w = p.grant();
  return StaleTokenRefusal(
      InBatch(p) + "fencing token " + w.token.ToString() + " for lock " + Quoted(w.lock) +
          " is stale: the store has already accepted token " + std::to_string(highest) +
          (strict && highest == w.token.value() ? " (strict mode allows one write per token)"
                                                : "") +
          ". Your lease was lost; acquire the lock again to get a newer token",
      highest);
}

Status WrongLockStatus(const Pending& p, const std::string& key_lock, bool by_prefix) {
  const WriteRequest& w = p.grant();
  std::string why =
      by_prefix ? "bound to lock " + Quoted(key_lock) + " by the store's configuration (lock_for)"
                : "bound to lock " + Quoted(key_lock) + ", the lock of the write that created it";
  return WrongLockRefusal(InBatch(p) + "the key is " + why + "; this write names lock " +
                              Quoted(w.lock) + ". Write it under lock " + Quoted(key_lock) +
                              (by_prefix ? "" : ", or delete it under that lock to free it"),
                          key_lock);
}

Status FenceServiceStatus(const Pending& p, std::string_view fence_service,
                          std::string_view service) {
  return Status::WrongService(
      InBatch(p) + "lock " + Quoted(p.grant().lock) + " is fenced by tokens of lock service " +
      Quoted(fence_service) + "; this token comes from " + Quoted(service) +
      ", whose tokens cannot be compared with them. Use a lease of that service (or have an "
      "administrator unbind the fence)");
}

Status UnverifiedStatus(const Pending& p) {
  const WriteRequest& w = p.grant();
  return Status::UnverifiedToken(InBatch(p) + "the lock service does not confirm fencing token " +
                                 w.token.ToString() + " as the current holder's token of lock " +
                                 Quoted(w.lock) +
                                 "; nothing was written. Acquire the lock to get a current token");
}

Status PreconditionStatus(const Pending& p, std::int64_t current) {
  const WriteRequest& w = p.writes[p.culprit];
  std::string wanted = *w.if_version == kIfAbsent
                           ? "to be absent"
                           : "to be at version " + std::to_string(*w.if_version);
  std::string found = current == 0 ? "it is absent" : "it is at version " + std::to_string(current);
  return PreconditionRefusal(InBatch(p) + "the write needs key " + Quoted(w.key) + " " + wanted +
                                 ", but " + found +
                                 "; nothing was written. Read the key again and decide anew",
                             current, w.key);
}

Decision SetFenceDecision(const AdminOp& op, std::int64_t now_ms) {
  Decision d;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(now_ms));
  d.op = "set_fence";
  d.lock = op.lock;
  d.token = op.highest.value();
  d.accepted = true;
  d.highest = op.highest.value();
  d.principal = op.principal;
  return d;
}

Status BatchFailure(const Status& failure, bool maybe_stored) {
  std::string message =
      maybe_stored
          ? "the write may or may not have been stored: " + failure.message() +
                ". It was not acknowledged; read the key to see whether it was, or retry the write"
          : "the write was not stored: " + failure.message() +
                ". Nothing in this batch was acknowledged; retry the write";
  return failure.IsUnavailable() ? Status::Unavailable(message) : Status::IoError(message);
}

}  // namespace fencekit::fencedstore
