// StoreClient: the C++ client of a `fenced` server. No Beast or Asio types appear here.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/refusal.h"
#include "fencekit/fencedstore/types.h"
#include "fencekit/common/token.h"

namespace fencekit {

struct StoreClientOptions {
  // Connect, send and receive each have this long (for https, the TLS handshake too).
  std::chrono::milliseconds timeout{5'000};
  // Sent as "Authorization: Bearer <token>" when not empty (fenced --auth). Its characters:
  // A-Z a-z 0-9 - . _ ~ + / and trailing '='.
  std::string bearer_token;
  // For https:// URLs: the PEM file of the certificate authorities to trust; empty trusts the
  // system's default ones. The server's certificate must name the URL's host.
  std::string ca_file;
};

// The store's own result types (fencekit/fencedstore/types.h), under the names this client used first.
using WriteResponse = WriteReceipt;
using GetResponse = StoredObject;

// Errors: kStaleToken (409; HighestToken() holds the store's fence), kPreconditionFailed (412;
// CurrentVersion() and RefusedKey() say what the store holds; fencedstore/refusal.h),
// kInvalidArgument (the
// request was refused as malformed: 400, 413, 428, 431), kNotFound, kUnauthenticated (401: no
// or unknown bearer token), kPermissionDenied (403: outside the token's rights), kUnavailable
// (cannot connect, TLS handshake or certificate check failed, timed out, or 5xx).
// Thread safety: not safe for concurrent use; use one client per thread. It keeps one
// keep-alive connection and reconnects when it breaks.
class StoreClient {
 public:
  // `base_url` like "http://127.0.0.1:8080" or "https://store.example:8443". kInvalidArgument
  // when it is neither, or the options are bad (a malformed token, an unreadable CA file).
  static Result<std::unique_ptr<StoreClient>> Open(std::string_view base_url,
                                                   StoreClientOptions options = {});
  virtual ~StoreClient() = default;

  // `lock` empty means the key itself. `service` is the lease's Lease::service, sent as
  // Fencing-Service; empty sends none.
  virtual Result<WriteResponse> Put(std::string_view lock, FencingToken token, std::string_view key,
                                    std::string_view value, std::string_view service) = 0;
  Result<WriteResponse> Put(std::string_view lock, FencingToken token, std::string_view key,
                            std::string_view value) {
    return Put(lock, token, key, value, {});
  }
  virtual Result<WriteResponse> Delete(std::string_view lock, FencingToken token,
                                       std::string_view key, std::string_view service) = 0;
  Result<WriteResponse> Delete(std::string_view lock, FencingToken token, std::string_view key) {
    return Delete(lock, token, key, {});
  }
  // A put or delete of `write.key` whose write.if_version is sent as If-Match: "N" (or
  // If-None-Match: * for kIfAbsent).
  virtual Result<WriteResponse> Write(std::string_view lock, FencingToken token,
                                      const ObjectWrite& write, std::string_view service) = 0;
  // Several writes under one grant (POST /v1/batch), applied all or none: one receipt per
  // write, in order. `lock` must be given. Refusals are those of a single write, for the
  // whole batch (the message names the write); kInvalidArgument also for a batch the server
  // finds too large (413).
  virtual Result<std::vector<WriteResponse>> Batch(std::string_view lock, FencingToken token,
                                                   const std::vector<ObjectWrite>& writes,
                                                   std::string_view service) = 0;
  // Under fenced --auth, the value's `lock` (as each listed key's, and a wrong lock's
  // BoundLock()) is empty unless the principal may read that lock.
  virtual Result<GetResponse> Get(std::string_view key) = 0;
  // One page of the keys starting with `prefix` and after `after` (GET /v1/objects): pass the
  // page's `next` as `after` for the next one. `limit` 1 to 1000; 0 takes the server's default
  // (100).
  virtual Result<ObjectPage> List(std::string_view prefix, std::string_view after,
                                  std::size_t limit) = 0;
  // The store's highest accepted token for `lock`; nullopt when none was accepted yet.
  virtual Result<std::optional<FencingToken>> Highest(std::string_view lock) = 0;
  // The fence with its lock-service binding; nullopt when none was accepted yet.
  virtual Result<std::optional<FenceState>> Fence(std::string_view lock) = 0;
  // The store's most recent decisions (GET /v1/history), oldest first; `limit` 1 to 10,000.
  // Admin only under fenced --auth.
  virtual Result<std::vector<Decision>> History(std::size_t limit) = 0;
  // Sets the fence of `lock` to `highest`, up or down, and unbinds it from its lock service
  // when `unbind_service` (PUT /v1/fences/{lock}; admin only, needs fenced --auth). The
  // store's decision, as recorded in its history.
  virtual Result<Decision> SetFence(std::string_view lock, FencingToken highest,
                                    bool unbind_service) = 0;
};

}  // namespace fencekit
