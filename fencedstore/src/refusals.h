// The words of the store's decisions, the same on every engine: each refusal's status (with
// what the client should do) and the failure of a batch. Private to fencedstore.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store_engine.h"
#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"

namespace fencekit::fencedstore {

// Whether the lock service confirmed the token of `p` as its lock's current holder's.
bool Verified(const Pending& p);

// The service a write of `p` binds or must match: under verify, the confirming service's (none
// when it names none), else the write's own. kWrongService when the write claims another
// service than the one that confirmed the token.
Status ResolveService(const Pending& p, std::string_view* service);

// The refusal of `p` for its write p.culprit, saying, for a batch, which write refused it and
// that none was applied.
Status StaleTokenStatus(const Pending& p, std::int64_t highest, bool strict);
// `by_prefix`: the key is bound by StoreOptions::lock_for rather than by its first write.
Status WrongLockStatus(const Pending& p, const std::string& key_lock, bool by_prefix);
// The fence of the lock is bound to `fence_service`; the write's token comes from `service`.
Status FenceServiceStatus(const Pending& p, std::string_view fence_service,
                          std::string_view service);
Status UnverifiedStatus(const Pending& p);
// The key holds `current` (0: absent) where the write's if_version asked for another.
Status PreconditionStatus(const Pending& p, std::int64_t current);

// The decision a fence administration records (op "set_fence"); seq is the engine's to set.
Decision SetFenceDecision(const AdminOp& op, std::int64_t now_ms);

// What every write of a failed batch is answered: kIoError, or kUnavailable when `failure` is.
// `maybe_stored`: the commit's outcome is unknown (the connection was lost while committing).
Status BatchFailure(const Status& failure, bool maybe_stored);

}  // namespace fencekit::fencedstore
