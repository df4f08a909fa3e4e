#include "bodies.h"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/pct_string_view.hpp>

#include "fencekit/common/text.h"
#include "fields.h"
#include "json_members.h"

namespace fencekit::wire {
namespace json = boost::json;

void PutName(json::object& o, std::string_view field, std::string_view bytes) {
  bool encoded = false;
  o[field] = JsonSafeText(bytes, &encoded);
  if (encoded) o[std::string(field) + "_encoding"] = "percent";
}

std::optional<std::string> GetName(const json::object& o, std::string_view field) {
  auto* v = o.if_contains(field);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  std::string s(v->as_string());
  auto* enc = o.if_contains(std::string(field) + "_encoding");
  if (enc == nullptr) return s;
  if (!enc->is_string() || enc->as_string() != "percent") return std::nullopt;
  auto pct = boost::urls::make_pct_string_view(s);
  if (!pct) return std::nullopt;
  return pct->decode();
}

json::object ReceiptToJson(const WriteReceipt& r, bool is_delete, json::storage_ptr storage) {
  json::object o(std::move(storage));
  PutName(o, "key", r.key);
  PutName(o, "lock", r.lock);
  o["token"] = r.token.value();
  o["version"] = r.version;
  if (is_delete) o["deleted"] = r.version != 0;
  return o;
}

std::string BatchToJson(std::string_view lock, FencingToken token, std::string_view service,
                        const std::vector<ObjectWrite>& writes) {
  json::object o;
  PutName(o, "lock", lock);
  o["token"] = token.value();
  if (!service.empty()) o["service"] = service;
  json::array list;
  list.reserve(writes.size());
  for (const auto& w : writes) {
    json::object item;
    item["op"] = w.is_delete ? "delete" : "put";
    PutName(item, "key", w.key);
    if (!w.is_delete) {
      if (IsValidUtf8(w.value)) {
        item["value"] = w.value;
      } else {
        item["value_base64"] = Base64Encode(w.value);
      }
    }
    if (w.if_version == kIfAbsent) {
      item["if_absent"] = true;
    } else if (w.if_version) {
      item["if_version"] = *w.if_version;
    }
    list.push_back(std::move(item));
  }
  o["writes"] = std::move(list);
  return json::serialize(o);
}

namespace {

constexpr std::string_view kBatchHint =
    ". The body is {\"lock\": L, \"token\": N, \"writes\": [{\"op\": \"put\", \"key\": K, "
    "\"value\": V}, {\"op\": \"delete\", \"key\": K}, ...]} (docs/http-api.md, POST "
    "/v1/batch)";

Status BadBatch(std::string what) {
  return Status::InvalidArgument(what + std::string(kBatchHint));
}

Result<ObjectWrite> WriteFromJson(const json::value& v, std::size_t i) {
  const std::string where = "write " + std::to_string(i);
  const json::object* o = v.if_object();
  if (o == nullptr) return BadBatch(where + " is not a JSON object");
  ObjectWrite w;
  bool has_op = false, has_value = false;
  for (const auto& field : *o) {
    std::string_view name = field.key();
    const json::value& f = field.value();
    if (name == "op") {
      if (!f.is_string() || (f.as_string() != "put" && f.as_string() != "delete")) {
        return BadBatch(where + ": \"op\" must be \"put\" or \"delete\"");
      }
      w.is_delete = f.as_string() == "delete";
      has_op = true;
    } else if (name == "key" || name == "key_encoding") {
      // Read below, together.
    } else if (name == "value") {
      if (!f.is_string()) return BadBatch(where + ": \"value\" must be a string");
      w.value = std::string(f.as_string());
      has_value = true;
    } else if (name == "value_base64") {
      auto bytes =
          f.is_string() ? Base64Decode(f.as_string(), Base64Padding::kRequired) : std::nullopt;
      if (!bytes) return BadBatch(where + ": \"value_base64\" is not base64 (RFC 4648, padded)");
      if (has_value) return BadBatch(where + " has both \"value\" and \"value_base64\"");
      w.value = std::move(*bytes);
      has_value = true;
    } else if (name == "if_version") {
      if (!f.is_int64() || f.as_int64() < 1) {
        return BadBatch(where + ": \"if_version\" must be a version, a whole number >= 1");
      }
      if (w.if_version) return BadBatch(where + " has both \"if_version\" and \"if_absent\"");
      w.if_version = f.as_int64();
    } else if (name == "if_absent") {
      if (!f.is_bool()) return BadBatch(where + ": \"if_absent\" must be true or false");
      if (f.as_bool()) {
        if (w.if_version) return BadBatch(where + " has both \"if_version\" and \"if_absent\"");
        w.if_version = kIfAbsent;
      }
    } else {
      return BadBatch(where + " has an unknown field \"" + JsonSafeText(name) + "\"");
    }
  }
  if (o->contains("value") && o->contains("value_base64")) {
    return BadBatch(where + " has both \"value\" and \"value_base64\"");
  }
  if (!has_op) return BadBatch(where + " has no \"op\"");
  auto key = GetName(*o, "key");
  if (!key) return BadBatch(where + " has no \"key\" string (or a malformed key_encoding)");
  w.key = std::move(*key);
  if (w.is_delete && has_value) return BadBatch(where + " deletes, but has a value");
  if (!w.is_delete && !has_value) {
    return BadBatch(where + " puts, but has no \"value\" or \"value_base64\"");
  }
  return w;
}

}  // namespace

Result<BatchBody> BatchFromJson(std::string_view body, std::size_t max_writes, bool* too_many) {
  *too_many = false;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return BadBatch("the body is not a JSON object");
  if (auto twice = DuplicateMember(body)) {
    return BadBatch("an object of the body names \"" + JsonSafeText(*twice) +
                    "\" twice; name each member once");
  }
  const json::object& o = v.as_object();
  for (const auto& field : o) {
    std::string_view name = field.key();
    if (name != "lock" && name != "lock_encoding" && name != "token" && name != "service" &&
        name != "writes") {
      return BadBatch("unknown field \"" + JsonSafeText(name) + "\"");
    }
  }
  BatchBody batch;
  auto lock = GetName(o, "lock");
  if (!lock) return BadBatch("\"lock\" is missing, not a string, or its encoding is malformed");
  batch.lock = std::move(*lock);
  const json::value* token = o.if_contains("token");
  Result<FencingToken> parsed = Status::InvalidArgument("\"token\" is missing");
  if (token != nullptr && token->is_int64()) {
    parsed = FencingToken::FromInt(token->as_int64());
  } else if (token != nullptr && token->is_string()) {
    parsed = FencingToken::Parse(token->as_string());
  } else if (token != nullptr) {
    parsed = Status::InvalidArgument("\"token\" is not a whole number from 1 to 2^63-1");
  }
  if (!parsed.ok()) return BadBatch(parsed.status().message());
  batch.token = *parsed;
  if (const json::value* service = o.if_contains("service"); service != nullptr) {
    if (!service->is_string()) return BadBatch("\"service\" must be a string");
    batch.service = std::string(service->as_string());
  }
  const json::value* writes = o.if_contains("writes");
  if (writes == nullptr) return BadBatch("\"writes\" is missing");
  auto parsed_writes = WritesFromJson(*writes, max_writes, too_many);
  if (!parsed_writes.ok()) return parsed_writes.status();
  batch.writes = std::move(*parsed_writes);
  return batch;
}

Result<std::vector<ObjectWrite>> WritesFromJson(const json::value& writes, std::size_t max_writes,
                                                bool* too_many) {
  *too_many = false;
  if (!writes.is_array()) return BadBatch("\"writes\" is not a list");
  const json::array& list = writes.as_array();
  if (list.size() > max_writes) {
    *too_many = true;
    return Status::InvalidArgument("the batch has " + std::to_string(list.size()) +
                                   " writes, more than the " + std::to_string(max_writes) +
                                   " one batch may have; split it under the same grant");
  }
  if (list.empty()) return BadBatch("\"writes\" is empty; send at least one write");
  std::vector<ObjectWrite> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto w = WriteFromJson(list[i], i);
    if (!w.ok()) return w.status();
    out.push_back(std::move(*w));
  }
  return out;
}

namespace {

// At least the bytes PutName's member takes serialized, past its fixed part: a UTF-8 name
// escaped as JSON (a control byte as \u00XX, a quote or backslash with a backslash), any other
// as %XX per byte with its "_encoding":"percent" member.
std::size_t NameBound(std::string_view name) {
  if (!IsValidUtf8(name)) return 3 * name.size() + 32;
  std::size_t n = 0;
  for (unsigned char c : name) n += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : 1;
  return n;
}

}  // namespace

std::size_t BatchReceiptsBound(std::string_view lock, const std::vector<ObjectWrite>& writes) {
  // Each receipt's other members ("version", up to 20 digits; "created" or "deleted") and
  // punctuation take less than 80 bytes; the answer's own, with "token", less than 96.
  constexpr std::size_t kPerWrite = 80, kFixed = 96;
  std::size_t bound = kFixed + NameBound(lock);
  for (const auto& w : writes) bound += kPerWrite + NameBound(w.key);
  return bound;
}

json::object BatchReceiptsToJson(std::string_view lock, FencingToken token,
                                 const std::vector<WriteReceipt>& receipts,
                                 const std::vector<bool>& is_delete) {
  json::object o;
  PutName(o, "lock", lock);
  o["token"] = token.value();
  json::array list;
  list.reserve(receipts.size());
  for (std::size_t i = 0; i < receipts.size(); ++i) {
    json::object item;
    PutName(item, "key", receipts[i].key);
    item["version"] = receipts[i].version;
    if (i < is_delete.size() && is_delete[i]) {
      item["deleted"] = receipts[i].version != 0;
    } else {
      item["created"] = receipts[i].created;
    }
    list.push_back(std::move(item));
  }
  o["writes"] = std::move(list);
  return o;
}

Result<std::vector<WriteReceipt>> BatchReceiptsFromJson(const json::value& v, std::string_view lock,
                                                        FencingToken token,
                                                        const std::vector<ObjectWrite>& writes) {
  const json::object* o = v.if_object();
  const json::value* list = o != nullptr ? o->if_contains("writes") : nullptr;
  if (list == nullptr || !list->is_array() || list->as_array().size() != writes.size()) {
    return Status::Unavailable("a batch's answer has no \"writes\" list of one entry per write");
  }
  std::vector<WriteReceipt> out;
  out.reserve(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const json::object* item = list->as_array()[i].if_object();
    const json::value* version = item != nullptr ? item->if_contains("version") : nullptr;
    auto key = item != nullptr ? GetName(*item, "key") : std::nullopt;
    if (version == nullptr || !version->is_int64() || !key || *key != writes[i].key) {
      return Status::Unavailable("a batch's answer for write " + std::to_string(i) +
                                 " lacks its \"version\" or names another key");
    }
    WriteReceipt r{std::move(*key), std::string(lock), token, version->as_int64(), false};
    if (const json::value* created = item->if_contains("created"); created != nullptr) {
      r.created = created->is_bool() && created->as_bool();
    }
    out.push_back(std::move(r));
  }
  return out;
}

json::object ObjectPageToJson(const ObjectPage& page) {
  json::array list;
  list.reserve(page.objects.size());
  for (const auto& info : page.objects) {
    json::object item;
    PutName(item, "key", info.key);
    item["version"] = info.version;
    PutName(item, "lock", info.lock);
    item["token"] = info.token.value();
    list.push_back(std::move(item));
  }
  json::object o;
  o["objects"] = std::move(list);
  if (page.next) PutName(o, "next", *page.next);
  return o;
}

Result<ObjectPage> ObjectPageFromJson(const json::value& v) {
  const json::object* o = v.if_object();
  const json::value* list = o != nullptr ? o->if_contains("objects") : nullptr;
  if (list == nullptr || !list->is_array()) {
    return Status::Unavailable("a listing has no \"objects\" list");
  }
  ObjectPage page;
  page.objects.reserve(list->as_array().size());
  for (const auto& entry : list->as_array()) {
    const json::object* item = entry.if_object();
    if (item == nullptr) return Status::Unavailable("a listing's entry is not a JSON object");
    auto key = GetName(*item, "key");
    // Under --auth, the lock only where the principal may read it: empty otherwise.
    auto lock = item->contains("lock") ? GetName(*item, "lock") : std::optional<std::string>("");
    const json::value* version = item->if_contains("version");
    const json::value* token = item->if_contains("token");
    if (!key || !lock || version == nullptr || !version->is_int64() || token == nullptr ||
        !token->is_int64()) {
      return Status::Unavailable("a listing's entry lacks one of key, lock, token, version");
    }
    auto t = FencingToken::FromInt(token->as_int64());
    if (!t.ok()) return Status::Unavailable("a listing's entry has a bad token");
    page.objects.push_back(ObjectInfo{std::move(*key), std::move(*lock), *t, version->as_int64()});
  }
  if (o->contains("next")) {
    auto next = GetName(*o, "next");
    if (!next) return Status::Unavailable("a listing's \"next\" is malformed");
    page.next = std::move(*next);
  }
  return page;
}

json::object DecisionToJson(const Decision& d) {
  json::object o;
  o["seq"] = d.seq;
  o["time_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(d.time.time_since_epoch()).count();
  o["op"] = d.op;
  PutName(o, "lock", d.lock);
  o["token"] = d.token;
  PutName(o, "key", d.key);
  o["accepted"] = d.accepted;
  o["highest"] = d.highest;
  if (!d.reason.empty()) o["reason"] = d.reason;
  if (!d.principal.empty()) PutName(o, "principal", d.principal);
  return o;
}

Result<Decision> DecisionFromJson(const json::value& v) {
  const json::object* o = v.if_object();
  if (o == nullptr) return Status::Unavailable("a history entry is not a JSON object");
  auto number = [&](std::string_view f) -> std::optional<std::int64_t> {
    auto* n = o->if_contains(f);
    if (n == nullptr || !n->is_int64()) return std::nullopt;
    return n->as_int64();
  };
  auto seq = number("seq"), time_ms = number("time_ms"), token = number("token"),
       highest = number("highest");
  auto op = GetName(*o, "op"), lock = GetName(*o, "lock"), key = GetName(*o, "key");
  auto* accepted = o->if_contains("accepted");
  if (!seq || !time_ms || !token || !highest || !op || !lock || !key || accepted == nullptr ||
      !accepted->is_bool()) {
    return Status::Unavailable(
        "a history entry lacks one of seq, time_ms, op, lock, token, key, accepted, highest");
  }
  Decision d;
  d.seq = *seq;
  d.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(*time_ms));
  d.op = std::move(*op);
  d.lock = std::move(*lock);
  d.token = *token;
  d.key = std::move(*key);
  d.accepted = accepted->as_bool();
  d.highest = *highest;
  // Optional: absent when accepted (reason) or unknown (principal).
  if (auto* reason = o->if_contains("reason"); reason != nullptr) {
    if (!reason->is_string()) {
      return Status::Unavailable("a history entry's reason is not a string");
    }
    d.reason = std::string(reason->as_string());
  }
  if (o->contains("principal")) {
    auto principal = GetName(*o, "principal");
    if (!principal) return Status::Unavailable("a history entry's principal is malformed");
    d.principal = std::move(*principal);
  }
  return d;
}
}  // namespace fencekit::wire
