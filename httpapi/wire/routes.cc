#include "routes.h"

#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

namespace fencekit::wire {

std::string ObjectPath(std::string_view key) {
  return std::string(kObjectsPrefix) + boost::urls::encode(key, boost::urls::unreserved_chars);
}

std::string ListTarget(std::string_view prefix, std::string_view after, std::size_t limit) {
  std::string target(kObjectsPath);
  target += "?prefix=" + boost::urls::encode(prefix, boost::urls::unreserved_chars);
  if (!after.empty())
    target += "&after=" + boost::urls::encode(after, boost::urls::unreserved_chars);
  if (limit != 0) target += "&limit=" + std::to_string(limit);
  return target;
}

std::string FencePath(std::string_view lock) {
  return std::string(kFencesPrefix) + boost::urls::encode(lock, boost::urls::unreserved_chars);
}

}  // namespace fencekit::wire
