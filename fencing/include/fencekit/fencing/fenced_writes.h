// Writes to a fenced store under a held lock: the lease's token and its lock service's id
// (Fencing-Service) go with every write, and a stale-token answer (409) marks the lease lost, as
// Kafka fences an old producer.
#pragma once

#include <string_view>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit {

// Puts `value` under `key`, fenced by `held`'s lock and token. kNotHeld without writing when
// the lease is already known lost. kStaleToken (and the lease is marked lost) when the store
// has accepted a newer token for the lock. kWrongService (the store's fence is bound to another
// lock service) and kUnverifiedToken (the store's lock service did not confirm the token) mark
// the lease lost too.
Result<WriteResponse> FencedPut(StoreClient& store, HeldLock& held, std::string_view key,
                                std::string_view value);
Result<WriteResponse> FencedDelete(StoreClient& store, HeldLock& held, std::string_view key);

}  // namespace fencekit
