#include "fencekit/lockclient/etcd_guard.h"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdio>

#include "etcd/gateway.h"
#include "etcd/tls.h"
#include "etcd/uri.h"
#include "fencekit/common/names.h"
#include "fencekit/common/text.h"

namespace fencekit::lockclient {
namespace {

namespace json = boost::json;

class GatewayGuard final : public fencekit::EtcdGuard {
 public:
  GatewayGuard(EtcdUri uri, etcd::GatewayAccess access, std::chrono::milliseconds timeout)
      : gateway_(std::move(uri.endpoints), timeout, 2, std::move(access)) {}

  Status Put(std::string_view fence_key, std::string_view data_key, std::string_view value,
             FencingToken token) override {
    return Guarded(fence_key, data_key, token,
                   json::object{{"request_put", json::object{{"key", Base64Encode(data_key)},
                                                             {"value", Base64Encode(value)}}}});
  }

  Status Delete(std::string_view fence_key, std::string_view data_key,
                FencingToken token) override {
    return Guarded(
        fence_key, data_key, token,
        json::object{{"request_delete_range", json::object{{"key", Base64Encode(data_key)}}}});
  }

 private:
  // The guard's transaction with `data_op` (a request on `data_key`) in its writing branch.
  Status Guarded(std::string_view fence_key, std::string_view data_key, FencingToken token,
                 json::object data_op) {
    // A fence key is a fencekit name (names.h), as every guard's lock name.
    if (Status bad = CheckName("the fence key", fence_key); !bad.ok()) return bad;
    if (data_key.empty() || fence_key == data_key) {
      return Status::InvalidArgument("the fence key and the data key must be two non-empty keys");
    }
    const std::string fence = Base64Encode(fence_key);
    const std::string padded = Base64Encode(EtcdFenceValue(token));
    // The compare is the stale case: a value compare on a missing key is false, so a new fence
    // takes the writing (failure) branch too. The refusing (success) branch is empty: the
    // gateway decodes and etcd logs a branch it does not take (reading the fence there cost
    // accepted writes a few percent), so a refusal reads the fence afterwards, for its message.
    json::object body{
        {"compare",
         json::array{json::object{
             {"key", fence}, {"target", "VALUE"}, {"result", "GREATER"}, {"value", padded}}}},
        {"failure",
         json::array{json::object{{"request_put", json::object{{"key", fence}, {"value", padded}}}},
                     std::move(data_op)}}};
    auto reply = gateway_.Call("/v3/kv/txn", body, nullptr);
    if (!reply.ok()) return reply.status();
    const auto* succeeded = reply->if_contains("succeeded");
    if (succeeded == nullptr || !succeeded->is_bool() || !succeeded->as_bool()) {
      return Status::Ok();
    }
    return Status::StaleToken("FENCE stale token " + token.ToString() + " for fence key " +
                              QuotedName(fence_key) + ": the highest is " + Highest(fence));
  }

  // The fence's value without its zero padding, read after a refusal (so at least the token
  // that refused it), or why it could not be read.
  std::string Highest(const std::string& fence) {
    auto reply = gateway_.Call("/v3/kv/range", json::object{{"key", fence}}, nullptr);
    if (!reply.ok()) return "unknown (reading the fence: " + reply.status().message() + ")";
    const auto* kvs = reply->if_contains("kvs");
    if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty() ||
        !kvs->as_array()[0].is_object()) {
      return "unknown (the fence is gone)";
    }
    auto decoded = Base64Decode(etcd::String(kvs->as_array()[0].as_object(), "value"));
    if (!decoded.has_value()) return "unknown (the fence is not base64)";
    std::string digits = *decoded;
    auto first_digit = digits.find_first_not_of('0');
    return first_digit == std::string::npos ? "0" : digits.substr(first_digit);
  }

  etcd::Gateway gateway_;
};

}  // namespace

}  // namespace fencekit::lockclient

namespace fencekit {

std::string EtcdFenceValue(FencingToken token) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(token.value()));
  return buf;
}

Result<std::unique_ptr<EtcdGuard>> EtcdGuard::Open(std::string_view uri,
                                                   std::chrono::milliseconds timeout) {
  auto parsed = lockclient::ParseEtcdUri(uri);
  if (!parsed.ok()) return parsed.status();
  lockclient::etcd::GatewayAccess access{.user = parsed->user, .password = parsed->password};
  if (parsed->tls) {
    auto tls =
        lockclient::etcd::MakeTlsContext(parsed->ca_file, parsed->cert_file, parsed->key_file);
    if (!tls.ok()) {
      return Status::InvalidArgument("etcd " + parsed->shown + ": " + tls.status().message());
    }
    access.tls = std::move(tls).value();
  }
  return std::unique_ptr<EtcdGuard>(
      std::make_unique<lockclient::GatewayGuard>(std::move(parsed).value(), std::move(access),
                                                 timeout));
}

}  // namespace fencekit
