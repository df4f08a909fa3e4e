// The results a fenced store gives, the same whether it is called in-process (FencedStore) or
// over HTTP (StoreClient): one definition for both ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fencekit/common/token.h"

namespace fencekit {

// A key's version names one state of it: each accepted put gives the key a new version, higher
// than every version the store gave before (to any key: a store-wide counter), so a version is
// never reused, not even after the key is deleted and created again. 0 means absent.
//
// What an accepted write did.
struct WriteReceipt {
  std::string key;
  std::string lock;
  FencingToken token;
  // Put: the key's version after the write. Delete: the deleted version, or 0 when the key did
  // not exist.
  std::int64_t version = 0;
  bool created = false;  // put only: the key did not exist before
};

// A condition on the key's version that a write needs to be applied (HTTP If-Match and
// If-None-Match): nullopt for none; kIfAbsent: only when the key does not exist; N >= 1: only
// when the key's version is N.
using IfVersion = std::optional<std::int64_t>;
inline constexpr std::int64_t kIfAbsent = 0;

// One write of an atomic batch (all of whose writes share one lock and token), or a
// conditional write.
struct ObjectWrite {
  bool is_delete = false;
  std::string key;
  std::string value;  // puts only
  IfVersion if_version;
};

struct StoredObject {
  std::string value;
  std::string lock;
  FencingToken token;  // the token of the write that stored this value
  std::int64_t version = 0;
};

// A key as a listing shows it: everything but its value.
struct ObjectInfo {
  std::string key;
  std::string lock;
  FencingToken token;
  std::int64_t version = 0;
};

// One page of a listing, in byte order of the keys. `next`, when set, is the key to list after
// for the next page; unset on the last page.
struct ObjectPage {
  std::vector<ObjectInfo> objects;
  std::optional<std::string> next;
};

// A lock's fence: the highest token accepted, and the lock service it is bound to.
struct FenceState {
  FencingToken highest;
  std::string service;  // empty when not bound
};

struct Decision {
  std::int64_t seq = 0;  // commit order
  std::chrono::system_clock::time_point time;
  std::string op;  // "put", "delete", or "set_fence" (fence administration)
  std::string lock;
  std::int64_t token = 0;
  std::string key;
  bool accepted = false;
  std::int64_t highest = 0;  // the fence after the decision
  // Why a write was refused: "stale_token", "wrong_lock", "wrong_service",
  // "unverified_token" or "precondition_failed"; empty when accepted. A refused batch is
  // recorded once, as the write that refused it.
  std::string reason;
  std::string principal;  // who asked, when known (always for set_fence)
};

}  // namespace fencekit
