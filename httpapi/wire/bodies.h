// The JSON bodies of fenced's HTTP API: receipts, batches, listings, decisions, and how a
// name travels in JSON.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/types.h"
#include "fencekit/common/token.h"

namespace fencekit::wire {

// o[field] = the name, or its percent-encoding with o[field + "_encoding"] = "percent" when it
// is not strict UTF-8.
void PutName(boost::json::object& o, std::string_view field, std::string_view bytes);
// The bytes PutName stored; nullopt when absent or malformed.
std::optional<std::string> GetName(const boost::json::object& o, std::string_view field);

// {"key","lock","token","version"} and, for a delete, "deleted"; held in `storage` (a caller on
// a hot path passes a buffer on its stack, which must outlive the object).
boost::json::object ReceiptToJson(const WriteReceipt& r, bool is_delete,
                                  boost::json::storage_ptr storage = {});

// The body of POST /v1/batch:
//   {"lock": L, "token": N, "service": S?, "writes": [W, ...]}
//   W = {"op": "put", "key": K, "value": "UTF-8 text" | "value_base64": "...",
//        "if_version": N? | "if_absent": true?} | {"op": "delete", "key": K, ...}
// Names as PutName writes them ("key_encoding": "percent" for bytes that are not UTF-8); the
// token a whole number, or its decimal digits as a string.
struct BatchBody {
  std::string lock;
  FencingToken token;
  std::string service;  // empty when not given
  std::vector<ObjectWrite> writes;
};
// Values are sent as "value" when strict UTF-8, else as "value_base64".
std::string BatchToJson(std::string_view lock, FencingToken token, std::string_view service,
                        const std::vector<ObjectWrite>& writes);
// kInvalidArgument saying what is wrong (naming the write); `*too_many` set when there are
// more than `max_writes` writes (nothing else is then checked).
Result<BatchBody> BatchFromJson(std::string_view body, std::size_t max_writes, bool* too_many);
// The "writes" list of a batch alone (fencectl batch reads it from a file); as BatchFromJson.
Result<std::vector<ObjectWrite>> WritesFromJson(const boost::json::value& list,
                                                std::size_t max_writes, bool* too_many);
// The answer to an accepted batch: {"lock","token","writes":[{"key","version",
// "created"|"deleted"}, ...]}, and the receipts it carries (`writes` the batch sent: the
// answer must have one per write, for the same keys).
// At least the size of BatchReceiptsToJson's answer serialized (JSON escapes and percent-
// encoding included) for a batch of `writes` under `lock`, from the names alone, and close to
// it: what fenced reserves of its answers' memory before the store decides the batch.
std::size_t BatchReceiptsBound(std::string_view lock, const std::vector<ObjectWrite>& writes);
boost::json::object BatchReceiptsToJson(std::string_view lock, FencingToken token,
                                        const std::vector<WriteReceipt>& receipts,
                                        const std::vector<bool>& is_delete);
Result<std::vector<WriteReceipt>> BatchReceiptsFromJson(const boost::json::value& v,
                                                        std::string_view lock, FencingToken token,
                                                        const std::vector<ObjectWrite>& writes);

// A listing: {"objects": [{"key","lock","token","version"}, ...], "next": K?}.
boost::json::object ObjectPageToJson(const ObjectPage& page);
// kUnavailable naming what is wrong when `v` is not a listing.
Result<ObjectPage> ObjectPageFromJson(const boost::json::value& v);
boost::json::object DecisionToJson(const Decision& d);
// kUnavailable naming what is missing when `v` is not a decision.
Result<Decision> DecisionFromJson(const boost::json::value& v);

}  // namespace fencekit::wire
