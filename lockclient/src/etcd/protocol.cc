#include "etcd/protocol.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

#include "fencekit/common/text.h"

namespace fencekit::lockclient::etcd {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

json::object Range(std::string key) {
  return json::object{{"request_range", json::object{{"key", std::move(key)}}}};
}

// The first kv of a range response (or of a txn's response_range entry), if any.
const json::object* FirstKv(const json::object* range) {
  if (range == nullptr) return nullptr;
  const json::value* kvs = range->if_contains("kvs");
  if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty()) return nullptr;
  const json::value& kv = kvs->as_array()[0];
  return kv.is_object() ? &kv.as_object() : nullptr;
}

// The n-th response of a txn reply, unwrapped ("response_range", "response_put", ...).
const json::object* TxnResponse(const json::object& reply, std::size_t n, std::string_view kind) {
  const json::value* rs = reply.if_contains("responses");
  if (rs == nullptr || !rs->is_array() || rs->as_array().size() <= n) return nullptr;
  const json::value& r = rs->as_array()[n];
  return r.is_object() ? Object(r.as_object(), kind) : nullptr;
}

bool Succeeded(const json::object& txn) {
  const json::value* v = txn.if_contains("succeeded");  // omitted when false
  return v != nullptr && v->is_bool() && v->as_bool();
}

std::optional<json::object> ParseResult(const std::string& line) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object* result = Object(v.as_object(), "result");
  if (result == nullptr) return std::nullopt;
  return *result;
}

bool IsCreated(const json::object& result) {
  const json::value* c = result.if_contains("created");
  return c != nullptr && c->is_bool() && c->as_bool();
}

// A TTL field in seconds: negative is 0, more than kMaxTtlSeconds is cut.
std::int64_t Ttl(const json::object& o) {
  return std::clamp<std::int64_t>(Int(o, "TTL"), 0, kMaxTtlSeconds);
}

std::int64_t Revision(const json::object& reply) {
  const json::object* header = Object(reply, "header");
  return header != nullptr ? Int(*header, "revision") : 0;
}

// "etcd:<hex>" from the reply header's cluster_id (a uint64, as a decimal string); empty when
// the header has none.
std::string ServiceId(const json::object& reply) {
  const json::object* header = Object(reply, "header");
  const json::value* id = header != nullptr ? header->if_contains("cluster_id") : nullptr;
  std::uint64_t value = 0;
  if (id != nullptr && id->is_string()) {
    const json::string& s = id->as_string();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size()) value = 0;
  } else if (id != nullptr && id->is_uint64()) {
    value = id->as_uint64();
  } else if (id != nullptr && id->is_int64() && id->as_int64() > 0) {
    value = static_cast<std::uint64_t>(id->as_int64());
  }
  if (value == 0) return "";
  char hex[17];
  auto [end, ec] = std::to_chars(hex, hex + sizeof hex, value, 16);
  return "etcd:" + std::string(hex, end);
}

// WhyGoneReads' answers, as responses `at` and `at + 1` of a txn reply.
Gone ParseWhyGone(const json::object& reply, std::size_t at, std::string_view owner) {
  Gone gone;
  if (const json::object* last = FirstKv(TxnResponse(reply, at, "response_range"))) {
    gone.released = Base64Decode(String(*last, "value")).value_or("") == owner;
  }
  if (const json::object* first = FirstKv(TxnResponse(reply, at + 1, "response_range"))) {
    gone.holder = Int(*first, "create_revision");
  }
  return gone;
}

}  // namespace

EtcdProtocol::EtcdProtocol(std::vector<Endpoint> endpoints, milliseconds op_timeout, int pool_size,
                           std::string service, GatewayAccess access, std::string key_prefix,
                           Clock* clock)
    : gateway_(std::move(endpoints), op_timeout, pool_size, std::move(access), clock),
      service_(std::move(service)),
      key_prefix_(std::move(key_prefix)) {}

// Lock names may hold any byte but NUL; the length prefix keeps one lock's line from being
// a prefix of another's ("a" and "a/b").
std::string EtcdProtocol::Prefix(std::string_view lock) const {
  return key_prefix_ + "lock/" + std::to_string(lock.size()) + ":" + std::string(lock) + "/";
}
std::string EtcdProtocol::PrefixEnd(std::string_view lock) const {
  std::string end = Prefix(lock);
  end.back() = '/' + 1;
  return end;
}
std::string EtcdProtocol::LastKey(std::string_view lock) const {
  return Base64Encode(key_prefix_ + "last/" + std::to_string(lock.size()) + ":" +
                      std::string(lock));
}
std::string EtcdProtocol::LastReleaseKey(std::string_view lock) const {
  return Base64Encode(key_prefix_ + "released/" + std::to_string(lock.size()) + ":" +
                      std::string(lock));
}
// The line's first key: the holder.
json::object EtcdProtocol::RangeFirst(std::string_view lock) const {
  return json::object{{"request_range", json::object{{"key", Base64Encode(Prefix(lock))},
                                                     {"range_end", Base64Encode(PrefixEnd(lock))},
                                                     {"sort_target", "CREATE"},
                                                     {"sort_order", "ASCEND"},
                                                     {"limit", "1"}}}};
}

std::string EtcdProtocol::Key(std::string_view lock, std::string_view owner) const {
  return Base64Encode(Prefix(lock) + std::string(owner));
}

Result<json::object> EtcdProtocol::Call(std::string_view target, const json::object& body,
                                        int* sends) {
  auto reply = gateway_.Call(target, body, sends);
  if (!reply.ok()) return WithPrefixHint(reply.status());
  return reply;
}

Status EtcdProtocol::WithPrefixHint(Status s) const {
  if (!s.IsPermissionDenied()) return s;
  return Status::PermissionDenied(
      s.message() + "; the lock keys are under \"" + key_prefix_ +
      "\": grant the user's role readwrite on that prefix (etcdctl role grant-permission "
      "--prefix ROLE readwrite " +
      key_prefix_ + "), or give a prefix it may use with ?prefix=");
}

std::int64_t EtcdProtocol::Seconds(milliseconds ttl) {
  return std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
}

Result<LeaseRef> EtcdProtocol::GrantLease(milliseconds ttl) {
  auto reply =
      Call("/v3/lease/grant", json::object{{"TTL", std::to_string(Seconds(ttl))}}, nullptr);
  if (!reply.ok()) return reply.status();
  if (auto e = String(*reply, "error"); !e.empty()) {
    return Status::Unavailable("etcd at " + service_ + " refused a lease: " + e);
  }
  LeaseRef lease{Int(*reply, "ID"), Ttl(*reply)};
  if (lease.id == 0) return Status::Unavailable("etcd at " + service_ + " granted no lease ID");
  return lease;
}

Result<std::int64_t> EtcdProtocol::KeepAlive(std::int64_t id) {
  auto reply = Call("/v3/lease/keepalive", json::object{{"ID", std::to_string(id)}}, nullptr);
  if (!reply.ok()) {
    if (reply.status().IsNotFound()) return std::int64_t{0};
    return reply.status();
  }
  if (const json::object* error = Object(*reply, "error")) {
    std::string m = String(*error, "message");
    if (Int(*error, "code") == kGrpcNotFound) return std::int64_t{0};
    return Status::Unavailable("etcd at " + service_ + " refused a keep-alive: " + m);
  }
  const json::object* result = Object(*reply, "result");
  return result != nullptr ? Ttl(*result) : std::int64_t{0};
}

Status EtcdProtocol::Revoke(std::int64_t id, int* sends) {
  auto reply = Call("/v3/lease/revoke", json::object{{"ID", std::to_string(id)}}, sends);
  return reply.ok() ? Status::Ok() : reply.status();
}

milliseconds EtcdProtocol::Remaining(std::int64_t lease_id) {
  if (lease_id == 0) return milliseconds(0);
  auto reply =
      Call("/v3/lease/timetolive", json::object{{"ID", std::to_string(lease_id)}}, nullptr);
  if (!reply.ok()) return milliseconds(0);
  return milliseconds(Ttl(*reply) * 1000);
}

std::int64_t EtcdProtocol::GrantedTtl(std::int64_t lease_id) {
  auto reply =
      Call("/v3/lease/timetolive", json::object{{"ID", std::to_string(lease_id)}}, nullptr);
  return reply.ok() ? std::clamp<std::int64_t>(Int(*reply, "grantedTTL"), 0, kMaxTtlSeconds) : 0;
}

Result<Place> EtcdProtocol::Enqueue(std::string_view lock, std::string_view owner, LeaseRef lease) {
  const std::string my_key = Key(lock, owner);
  json::object put_mine{{"request_put", json::object{{"key", my_key},
                                                     {"value", Base64Encode(owner)},
                                                     {"lease", std::to_string(lease.id)}}}};
  json::object put_last{
      {"request_put", json::object{{"key", LastKey(lock)}, {"value", Base64Encode(owner)}}}};
  json::object txn{
      {"compare",
       json::array{json::object{{"target", "CREATE"}, {"key", my_key}, {"create_revision", "0"}}}},
      {"success", json::array{put_mine, put_last, RangeFirst(lock)}},
      {"failure", json::array{Range(my_key), RangeFirst(lock)}}};
  auto reply = Call("/v3/kv/txn", txn, nullptr);
  if (!reply.ok()) return reply.status();
  Place place;
  place.revision = Revision(*reply);
  place.service = ServiceId(*reply);
  const json::object* first = nullptr;
  if (Succeeded(*reply)) {
    place.mine = place.revision;
    first = FirstKv(TxnResponse(*reply, 2, "response_range"));
  } else {
    const json::object* kv = FirstKv(TxnResponse(*reply, 0, "response_range"));
    if (kv == nullptr) return BadReply(lock);
    place.mine = Int(*kv, "create_revision");
    place.existing_lease = Int(*kv, "lease");
    first = FirstKv(TxnResponse(*reply, 1, "response_range"));
  }
  if (first == nullptr || place.mine <= 0) return BadReply(lock);
  place.first_key = String(*first, "key");
  place.first_rev = Int(*first, "create_revision");
  place.first_lease = Int(*first, "lease");
  return place;
}

Result<Place> EtcdProtocol::Look(std::string_view lock, std::string_view owner, std::int64_t mine) {
  json::object before{
      {"request_range", json::object{{"key", Base64Encode(Prefix(lock))},
                                     {"range_end", Base64Encode(PrefixEnd(lock))},
                                     {"sort_target", "CREATE"},
                                     {"sort_order", "DESCEND"},
                                     {"max_create_revision", std::to_string(mine - 1)},
                                     {"limit", "1"},
                                     {"keys_only", true}}}};
  json::object txn{{"success", json::array{RangeFirst(lock), before, Range(Key(lock, owner))}}};
  auto reply = Call("/v3/kv/txn", txn, nullptr);
  if (!reply.ok()) return reply.status();
  Place place;
  place.revision = Revision(*reply);
  place.service = ServiceId(*reply);
  if (const json::object* kv = FirstKv(TxnResponse(*reply, 2, "response_range"))) {
    place.mine = Int(*kv, "create_revision");
  }
  if (const json::object* first = FirstKv(TxnResponse(*reply, 0, "response_range"))) {
    place.first_key = String(*first, "key");
    place.first_rev = Int(*first, "create_revision");
    place.first_lease = Int(*first, "lease");
  }
  if (const json::object* pred = FirstKv(TxnResponse(*reply, 1, "response_range"))) {
    place.predecessor = String(*pred, "key");
  }
  return place;
}

Result<std::optional<ContenderKey>> EtcdProtocol::ReadKey(std::string_view lock,
                                                          std::string_view owner) {
  auto reply = Call("/v3/kv/range", json::object{{"key", Key(lock, owner)}}, nullptr);
  if (!reply.ok()) return reply.status();
  const json::object* kv = FirstKv(&*reply);
  if (kv == nullptr) return std::optional<ContenderKey>();
  return std::optional<ContenderKey>(ContenderKey{Int(*kv, "create_revision"), Int(*kv, "lease")});
}

json::array EtcdProtocol::WhyGoneReads(std::string_view lock) const {
  return json::array{Range(LastReleaseKey(lock)), RangeFirst(lock)};
}

namespace {

// A txn's compare: `key` exists and was created at revision `token` (this holder's key).
json::array IsHoldersKey(const std::string& key, FencingToken token) {
  return json::array{
      json::object{{"target", "CREATE"}, {"key", key}, {"create_revision", token.ToString()}}};
}

}  // namespace

Result<ReleasedKey> EtcdProtocol::ReleaseKey(std::string_view lock, std::string_view owner,
                                             FencingToken token, int* sends) {
  const std::string my_key = Key(lock, owner);
  json::object txn{
      {"compare", IsHoldersKey(my_key, token)},
      {"success",
       json::array{json::object{{"request_delete_range", json::object{{"key", my_key}}}},
                   json::object{{"request_put", json::object{{"key", LastReleaseKey(lock)},
                                                             {"value", Base64Encode(owner)}}}}}},
      {"failure", WhyGoneReads(lock)}};
  auto reply = Call("/v3/kv/txn", txn, sends);
  if (!reply.ok()) return reply.status();
  ReleasedKey out;
  out.done = Succeeded(*reply);
  if (!out.done) out.gone = ParseWhyGone(*reply, 0, owner);
  return out;
}

Result<Gone> EtcdProtocol::WhyGone(std::string_view lock, std::string_view owner) {
  auto reply = Call("/v3/kv/txn", json::object{{"success", WhyGoneReads(lock)}}, nullptr);
  if (!reply.ok()) return reply.status();
  return ParseWhyGone(*reply, 0, owner);
}

Result<LineHead> EtcdProtocol::ReadHead(std::string_view lock) {
  json::object txn{{"success", json::array{RangeFirst(lock), Range(LastKey(lock))}}};
  auto reply = Call("/v3/kv/txn", txn, nullptr);
  if (!reply.ok()) return reply.status();
  LineHead head;
  head.service = ServiceId(*reply);
  if (const json::object* last = FirstKv(TxnResponse(*reply, 1, "response_range"))) {
    head.last_issued = Int(*last, "mod_revision");
  }
  const json::object* first = FirstKv(TxnResponse(*reply, 0, "response_range"));
  if (first == nullptr) return head;
  head.held = true;
  head.owner = Base64Decode(String(*first, "value")).value_or("");
  head.token = Int(*first, "create_revision");
  head.lease = Int(*first, "lease");
  return head;
}

Result<Holder> EtcdProtocol::ReadHolder(std::string_view lock) {
  json::object range = RangeFirst(lock)["request_range"].as_object();
  auto reply = Call("/v3/kv/range", range, nullptr);
  if (!reply.ok()) return reply.status();
  Holder holder{.service = ServiceId(*reply)};
  if (const json::object* first = FirstKv(&*reply)) holder.token = Int(*first, "create_revision");
  return holder;
}

Result<bool> EtcdProtocol::MoveKeyToLease(std::string_view lock, std::string_view owner,
                                          FencingToken token, std::int64_t lease_id) {
  const std::string my_key = Key(lock, owner);
  json::object txn{
      {"compare", IsHoldersKey(my_key, token)},
      {"success",
       json::array{json::object{{"request_put", json::object{{"key", my_key},
                                                             {"lease", std::to_string(lease_id)},
                                                             {"ignore_value", true}}}}}}};
  auto reply = Call("/v3/kv/txn", txn, nullptr);
  if (!reply.ok()) return reply.status();
  return Succeeded(*reply);
}

Result<bool> EtcdProtocol::Exists(const std::string& key) {
  auto reply = Call("/v3/kv/range", json::object{{"key", key}, {"count_only", true}}, nullptr);
  if (!reply.ok()) return reply.status();
  return Int(*reply, "count") != 0;
}

Result<std::unique_ptr<GatewayConn>> EtcdProtocol::Watch(const json::object& create,
                                                         bool confirmed) {
  const std::string body = json::serialize(json::object{{"create_request", create}});
  for (int attempt = 0;; ++attempt) {
    auto stream = gateway_.Stream("/v3/watch", body);
    if (!stream.ok() || !confirmed) return stream;
    auto created = (*stream)->NextMessage(gateway_.op_timeout());
    std::optional<json::object> result;
    if (created.ok() && created->has_value()) result = ParseResult(**created);
    if (result && IsCreated(*result) && !IsCanceled(**created)) return stream;
    Status s = created.status();
    if (s.ok() && result && IsCreated(*result)) {
      // Created and canceled at once: etcd refused the watch (its token, its permission).
      bool retry = false;
      s = gateway_.StreamRefused(**stream, String(*result, "cancel_reason"), &retry);
      if (retry && attempt == 0) continue;
      if (s.ok()) s = Status::Unavailable("etcd at " + service_ + " refused a watch twice");
      return WithPrefixHint(s);
    }
    if (s.ok()) {
      s = Status::Unavailable("etcd at " + (*stream)->endpoint().Name() +
                              " did not confirm a watch");
    }
    gateway_.Failed((*stream)->index());
    return s;
  }
}

Result<std::unique_ptr<GatewayConn>> EtcdProtocol::WatchKey(const std::string& key) {
  return Watch(json::object{{"key", key}, {"filters", json::array{"NOPUT"}}}, true);
}

Result<std::unique_ptr<GatewayConn>> EtcdProtocol::WatchLine(std::string_view lock) {
  return Watch(json::object{{"key", Base64Encode(Prefix(lock))},
                            {"range_end", Base64Encode(PrefixEnd(lock))},
                            {"filters", json::array{"NOPUT"}}},
               false);
}

bool EtcdProtocol::IsDeleteEvent(const std::string& message) {
  auto result = ParseResult(message);
  if (!result) return false;
  const json::value* events = result->if_contains("events");
  if (events == nullptr || !events->is_array()) return false;
  for (const json::value& e : events->as_array()) {
    if (e.is_object() && String(e.as_object(), "type") == "DELETE") return true;
  }
  return false;
}

bool EtcdProtocol::IsCanceled(const std::string& message) {
  auto result = ParseResult(message);
  if (!result) return true;  // an error object: the watch is no use
  const json::value* c = result->if_contains("canceled");
  return c != nullptr && c->is_bool() && c->as_bool();
}

Result<FencingToken> EtcdProtocol::Token(std::string_view lock, std::int64_t revision) const {
  auto t = FencingToken::FromInt(revision);
  if (!t.ok()) {
    return Status::Unavailable("etcd at " + service_ + " sent an unusable revision " +
                               std::to_string(revision) + " for lock \"" + std::string(lock) +
                               "\"");
  }
  return *t;
}

Status EtcdProtocol::BadReply(std::string_view lock) const {
  return Status::Unavailable("unexpected reply from etcd at " + service_ + " for lock \"" +
                             std::string(lock) + "\"");
}

}  // namespace fencekit::lockclient::etcd
