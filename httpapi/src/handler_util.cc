#include "handler_util.h"

#include <boost/json/serialize.hpp>

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;

HttpResponse JsonResponse(http::status status, const json::object& body, unsigned version,
                          bool keep_alive) {
  HttpResponse res(status, version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = json::serialize(body);
  res.body() += '\n';
  res.prepare_payload();
  return res;
}

// Drops `o`'s "lock" (and its encoding) when `who` may not read that lock.
void HideLockUnlessReadable(json::object& o, const Principal* who, std::string_view lock) {
  if (MaySeeLock(who, lock)) return;
  o.erase("lock");
  o.erase("lock_encoding");
}

}  // namespace fencekit::httpapi
