#include "fencekit/fencing/fenced_writes.h"

#include "fencekit/fencedstore/refusal.h"

namespace fencekit {
namespace {

template <typename Write>
Result<WriteResponse> Fenced(HeldLock& held, Write&& write) {
  if (held.lost()) {
    return Status::NotHeld("not writing: the lease is lost (" + held.lost_reason().message() + ")");
  }
  Lease lease = held.lease();
  auto r = write(lease);
  if (!r.ok() && r.status().IsStaleToken()) {
    Status s = StaleTokenRefusal(
        r.status().message() + ". The lease on lock \"" + lease.lock + "\" with token " +
            lease.token.ToString() +
            " is lost: another holder wrote with a newer token, or the lock service lost its "
            "counter (e.g. Redis restarted without persistence)",
        HighestToken(r.status()).value_or(0));
    held.MarkLost(s);
    return s;
  }
  // A store that binds its fence to another lock service, or whose lock service does not
  // confirm this token as its holder's, will never take a write of this lease either.
  if (!r.ok() && (r.status().IsWrongService() || r.status().IsUnverifiedToken())) {
    held.MarkLost(r.status());
  }
  return r;
}

}  // namespace

Result<WriteResponse> FencedPut(StoreClient& store, HeldLock& held, std::string_view key,
                                std::string_view value) {
  return Fenced(held, [&](const Lease& l) { return store.Put(l.lock, l.token, key, value, l.service); });
}

Result<WriteResponse> FencedDelete(StoreClient& store, HeldLock& held, std::string_view key) {
  return Fenced(held, [&](const Lease& l) { return store.Delete(l.lock, l.token, key, l.service); });
}

}  // namespace fencekit
