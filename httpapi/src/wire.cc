#include "wire.h"

#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

namespace fencekit::wire {

std::string NameToHeader(std::string_view name) {
  static constexpr auto kKept = boost::urls::unreserved_chars + '/';
  return boost::urls::encode(name, kKept);
}

std::optional<std::string> NameFromHeader(std::string_view value) {
  auto pct = boost::urls::make_pct_string_view(value);
  if (!pct) return std::nullopt;
  return pct->decode();
}

}  // namespace fencekit::wire
