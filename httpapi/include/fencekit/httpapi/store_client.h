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
#include "fencekit/common/token.h"
#include "fencekit/common/store_types.h"

namespace fencekit {

struct StoreClientOptions {
  // Connect, send and receive each have this long.
  std::chrono::milliseconds timeout{5'000};
};

// The store's own result types (common/store_types.h), under the names this client used first.
using WriteResponse = WriteReceipt;
using GetResponse = StoredObject;

// Errors: kStaleToken (409; highest_token() holds the store's fence), kInvalidArgument (the
// request was refused as malformed: 400, 413, 428, 431), kNotFound, kUnavailable (cannot
// connect, timed out, or 5xx).
// Thread safety: not safe for concurrent use; use one client per thread. It keeps one
// keep-alive connection and reconnects when it breaks.
class StoreClient {
 public:
  // `base_url` like "http://127.0.0.1:8080". kInvalidArgument when it is not an http URL.
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
  virtual Result<GetResponse> Get(std::string_view key) = 0;
  // The store's highest accepted token for `lock`; nullopt when none was accepted yet.
  virtual Result<std::optional<FencingToken>> Highest(std::string_view lock) = 0;
  // The store's most recent decisions (GET /v1/history), oldest first; `limit` 1 to 10,000.
  virtual Result<std::vector<Decision>> History(std::size_t limit) = 0;
};

}  // namespace fencekit
