#include "net/framing.h"

#include <boost/beast/core/string.hpp>
#include <boost/url/parse.hpp>
#include <vector>

namespace fencekit::httpapi {
namespace http = boost::beast::http;

namespace {

// One list element of a field value without its parameters and surrounding whitespace.
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<FramingError> CheckTransferEncoding(const http::request_header<>& h) {
  auto [first, last] = h.equal_range(http::field::transfer_encoding);
  if (first == last) return std::nullopt;
  auto bad = [](std::string message) {
    return FramingError{wire::Error::kBadFraming, std::move(message)};
  };
  if (h.version() < 11) {
    return bad("Transfer-Encoding is not defined for HTTP/1.0; send a Content-Length");
  }
  // The codings of every Transfer-Encoding line, in order (a list may span lines).
  std::vector<std::string_view> codings;
  for (auto it = first; it != last; ++it) {
    std::string_view value = it->value();
    while (true) {
      auto comma = value.find(',');
      std::string_view element = Trim(value.substr(0, comma));
      if (!element.empty()) codings.push_back(element);
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  if (codings.empty()) return bad("Transfer-Encoding is empty; name the coding (chunked)");
  std::size_t chunked = 0;
  for (auto c : codings) chunked += boost::beast::iequals(c, "chunked");
  if (!boost::beast::iequals(codings.back(), "chunked") || chunked != 1) {
    return bad(
        "the final transfer coding must be chunked, applied once, or the body's length cannot "
        "be known; fenced accepts Transfer-Encoding: chunked or a Content-Length");
  }
  if (codings.size() > 1) {
    return FramingError{wire::Error::kUnsupportedTransferCoding,
                        "fenced implements no transfer coding but chunked; send the body "
                        "with Transfer-Encoding: chunked alone, or a Content-Length"};
  }
  return std::nullopt;
}

std::optional<FramingError> CheckHost(const http::request_header<>& h) {
  auto [first, last] = h.equal_range(http::field::host);
  auto count = std::distance(first, last);
  auto bad = [](std::string message) {
    return FramingError{wire::Error::kBadHost, std::move(message)};
  };
  if (count == 0) {
    if (h.version() >= 11) return bad("an HTTP/1.1 request must carry a Host header");
    return std::nullopt;
  }
  if (count > 1) return bad("the Host header was given more than once; send it exactly once");
  std::string_view value = first->value();
  if (value.empty()) return std::nullopt;
  auto authority = boost::urls::parse_authority(value);
  if (!authority || authority->has_userinfo()) {
    return bad("the Host header is not a valid host[:port]");
  }
  return std::nullopt;
}

}  // namespace

std::optional<FramingError> CheckFraming(const http::request_header<>& header) {
  if (auto e = CheckTransferEncoding(header)) return e;
  return CheckHost(header);
}

void ToOriginForm(http::request_header<>& h) {
  const std::string_view target = h.target();
  if (target.empty() || target.front() == '/') return;
  auto uri = boost::urls::parse_absolute_uri(target);
  if (!uri || !uri->has_authority() || uri->has_userinfo()) return;
  if (uri->scheme_id() != boost::urls::scheme::http &&
      uri->scheme_id() != boost::urls::scheme::https) {
    return;
  }
  std::string origin = uri->encoded_path().empty() ? "/" : std::string(uri->encoded_path());
  if (uri->has_query()) origin += "?" + std::string(uri->encoded_query());
  const std::string host(uri->encoded_host_and_port());
  h.target(origin);
  h.set(http::field::host, host);
}

}  // namespace fencekit::httpapi
