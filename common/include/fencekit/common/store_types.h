// The results a fenced store gives, the same whether it is called in-process (FencedStore) or
// over HTTP (StoreClient): one definition for both ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "fencekit/common/token.h"

namespace fencekit {

// What an accepted write did.
struct WriteReceipt {
  std::string key;
  std::string lock;
  FencingToken token;
  // Put: the key's version after the write (1 when created). Delete: the deleted version, or 0
  // when the key did not exist.
  std::int64_t version = 0;
  bool created = false;  // put only: the key did not exist before
};

struct StoredObject {
  std::string value;
  std::string lock;
  FencingToken token;  // the token of the write that stored this value
  std::int64_t version = 0;
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
  // Why a write was refused: "stale_token", "wrong_lock", "wrong_service" or
  // "unverified_token"; empty when accepted.
  std::string reason;
  std::string principal;  // who asked, when known (always for set_fence)
};

}  // namespace fencekit
