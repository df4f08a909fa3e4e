// Which lock service (its URI) and how a LockClient uses it (LockOptions).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "fencekit/common/clock.h"

namespace fencekit {

// The default lock service, the one `fencectl` uses when given no --locks: $FENCEKIT_LOCKS when
// set and not empty, else one SQLite file per user and machine,
// sqlite://$XDG_STATE_HOME/fencekit/locks.db ($XDG_STATE_HOME defaults to ~/.local/state;
// without $HOME, /tmp/fencekit-UID), whatever the working directory. Makes the folder when it is
// missing. LockClient::Open("") opens it.
std::string DefaultLockUri();

// `uri` with the password of its user:password@ part, if any, replaced by "***", for messages
// and logs ("etcd://app:***@h1:2379"). Works on malformed URIs too.
std::string LockUriWithoutPassword(std::string_view uri);

struct LockOptions {
  // --- Affects behaviour ---
  // Lease length asked of the service.
  std::chrono::milliseconds ttl{10'000};
  // Validity is shortened by drift = ttl * drift_factor + drift_min (clock drift allowance).
  double drift_factor = 0.01;
  std::chrono::milliseconds drift_min{2};
  // Time source. Null means Clock::Real(). Not owned.
  Clock* clock = nullptr;

  // --- Affects performance ---
  // Each request to the service has this long (connect, send, reply).
  std::chrono::milliseconds op_timeout{1'000};
  // Retries of a busy or unavailable service: jittered exponential backoff in this range.
  std::chrono::milliseconds retry_min{2};
  std::chrono::milliseconds retry_max{200};
  // Connections kept open to a network service.
  int pool_size = 4;

  // --- Redis and Redlock ---
  // Locks whose highest token this client remembers (least recently used forgotten first), to
  // keep tokens rising for them if Redis loses its counters; see counter_resets_detected().
  std::size_t remembered_locks = 100'000;

  // --- Redlock only ---
  // Each node has this long per request (far below the ttl, so a dead node is skipped fast).
  std::chrono::milliseconds redlock_node_timeout{50};
  // Ask the nodes one after another instead of all at once.
  bool redlock_sequential = false;
};

}  // namespace fencekit
