#include "handlers/handler_util.h"

#include <algorithm>
#include <boost/json/serializer.hpp>

namespace fencekit::httpapi {
namespace http = boost::beast::http;
namespace json = boost::json;

HttpResponse JsonResponse(http::status status, const json::object& body, unsigned version,
                          bool keep_alive) {
  HttpResponse res(status, version);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  // Serialized straight into the body: a receipt costs the body's one allocation.
  json::serializer writer;
  writer.reset(&body);
  std::string& out = res.body();
  std::size_t chunk = 256;
  while (!writer.done()) {
    const std::size_t used = out.size();
    out.resize(used + chunk);
    out.resize(used + writer.read(out.data() + used, chunk).size());
    chunk = std::max(chunk, used);  // a long body grows geometrically
  }
  out += '\n';
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
