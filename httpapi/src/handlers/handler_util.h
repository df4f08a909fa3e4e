// What the handler's files share: the JSON answer, and the rule that a key's lock is shown
// only to who may read it. Private to the server.
#pragma once

#include <boost/json/object.hpp>
#include <string_view>

#include "handlers/auth.h"
#include "handlers/handler.h"

namespace fencekit::httpapi {

// `body` serialized with a trailing newline, as application/json.
HttpResponse JsonResponse(boost::beast::http::status status, const boost::json::object& body,
                          unsigned version, bool keep_alive);

// True when `who` (null: no --auth, everyone may) may see that a key belongs to `lock`.
inline bool MaySeeLock(const Principal* who, std::string_view lock) {
  return who == nullptr || who->MayRead(lock);
}

// Drops `o`'s "lock" (and its encoding) when `who` may not read that lock.
void HideLockUnlessReadable(boost::json::object& o, const Principal* who, std::string_view lock);

}  // namespace fencekit::httpapi
