// The guard for data kept in etcd (docs/guard-in-your-database.md, "etcd"): one transaction
// that writes (or deletes) a key only when the fencing token is >= the highest one its fence key
// holds.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "fencekit/common/status.h"
#include "fencekit/common/token.h"

namespace fencekit {

// The fence key's value for `token`: 20 decimal digits, zero-padded, so that etcd's byte-wise
// comparison of values is the tokens' numeric order.
std::string EtcdFenceValue(FencingToken token);

// Guarded writes through etcd's v3 JSON gateway. Thread safety: safe for concurrent use.
class EtcdGuard {
 public:
  // `uri`: etcd[s]://[user:password@]host:port[,...][?cacert=F&cert=F&key=F], as for the lock
  // service (its prefix= is not used). kInvalidArgument for a bad URI or TLS files.
  static Result<std::unique_ptr<EtcdGuard>> Open(
      std::string_view uri, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  virtual ~EtcdGuard() = default;

  // In one transaction: when `fence_key` is absent or holds a token <= `token`, sets it to
  // EtcdFenceValue(token) and `data_key` to `value`; OK. Otherwise writes nothing and returns
  // kStaleToken "FENCE stale token T for fence key "K": the highest is H" (K as QuotedName; H
  // read just after the refusal, so possibly above the token that refused T; "unknown (why)"
  // when that read fails). kInvalidArgument, nothing written, for a fence key that
  // is no fencekit name (1 to 1024 bytes without control characters: CheckName), an empty data
  // key or the same key twice, and for a request larger than etcd takes (its answer says so; sending it
  // again cannot help); kUnavailable (and the like) when etcd did not answer: the write may or
  // may not have happened.
  virtual Status Put(std::string_view fence_key, std::string_view data_key, std::string_view value,
                     FencingToken token) = 0;
  // As Put, deleting `data_key` (OK whether or not it existed) instead of setting it; the fence
  // is raised all the same.
  virtual Status Delete(std::string_view fence_key, std::string_view data_key,
                        FencingToken token) = 0;
};

}  // namespace fencekit
