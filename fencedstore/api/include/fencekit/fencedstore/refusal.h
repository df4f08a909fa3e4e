// What a fenced store's refusals carry beyond their code and message: the fence of a stale
// token, the lock a key is bound to, what a failed precondition found. Attached to common's
// Status as its detail, the same whether the store is called in-process (FencedStore) or over
// HTTP (StoreClient).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fencekit/common/status.h"

namespace fencekit {

// The detail of a store's refusal; each field is set only for the refusal it belongs to.
// Thread safety: immutable once attached to a Status; safe to share.
struct RefusalDetail final : StatusDetail {
  // kStaleToken: the highest token the store had accepted for the lock.
  std::optional<std::int64_t> highest_token;
  // kWrongLock: the lock the key is bound to (empty when the server hides it).
  std::optional<std::string> bound_lock;
  // kPreconditionFailed: the key's version when the write was refused (0: absent), and the key
  // (in a batch, the write that refused it).
  std::optional<std::int64_t> current_version;
  std::optional<std::string> key;
};

// kStaleToken; `highest` is the highest token the store had accepted for the lock.
inline Status StaleTokenRefusal(std::string msg, std::int64_t highest) {
  auto d = std::make_shared<RefusalDetail>();
  d->highest_token = highest;
  return Status::WithDetail(StatusCode::kStaleToken, std::move(msg), std::move(d));
}

// kWrongLock; `bound_lock` is the lock the key belongs to.
inline Status WrongLockRefusal(std::string msg, std::string bound_lock) {
  auto d = std::make_shared<RefusalDetail>();
  d->bound_lock = std::move(bound_lock);
  return Status::WithDetail(StatusCode::kWrongLock, std::move(msg), std::move(d));
}

// kPreconditionFailed; `version` is the key's version in the store (0: absent), `key` the key
// whose precondition failed.
inline Status PreconditionRefusal(std::string msg, std::int64_t version, std::string key) {
  auto d = std::make_shared<RefusalDetail>();
  d->current_version = version;
  d->key = std::move(key);
  return Status::WithDetail(StatusCode::kPreconditionFailed, std::move(msg), std::move(d));
}

// The refusal's detail; nullptr when `s` carries none.
inline const RefusalDetail* RefusalDetailOf(const Status& s) {
  return dynamic_cast<const RefusalDetail*>(s.detail());
}

// Each field of a refusal's detail; nullopt when `s` does not carry it.
inline std::optional<std::int64_t> HighestToken(const Status& s) {
  const RefusalDetail* d = RefusalDetailOf(s);
  return d != nullptr ? d->highest_token : std::nullopt;
}
inline std::optional<std::string> BoundLock(const Status& s) {
  const RefusalDetail* d = RefusalDetailOf(s);
  return d != nullptr ? d->bound_lock : std::nullopt;
}
inline std::optional<std::int64_t> CurrentVersion(const Status& s) {
  const RefusalDetail* d = RefusalDetailOf(s);
  return d != nullptr ? d->current_version : std::nullopt;
}
inline std::optional<std::string> RefusedKey(const Status& s) {
  const RefusalDetail* d = RefusalDetailOf(s);
  return d != nullptr ? d->key : std::nullopt;
}

}  // namespace fencekit
