// Framing: what a request's header section must satisfy before fenced reads its body or acts on
// it. Beast parses HTTP/1.1 but lets through framings that RFC 9112 says a server must refuse,
// and that a proxy in front of fenced may read differently (request smuggling).
#pragma once

#include <boost/beast/http/message.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "wire.h"

namespace fencekit::httpapi {

struct FramingError {
  wire::Error error;  // kBadFraming, kBadHost or kUnsupportedTransferCoding
  std::string message;
};

// nullopt when the header section frames the request unambiguously:
// - Transfer-Encoding, if present, is exactly `chunked` (all its field lines together), on
//   HTTP/1.1. A final coding other than chunked, chunked twice, or Transfer-Encoding on
//   HTTP/1.0 is 400 (RFC 9112 6.1, 6.3); a known-but-unimplemented or unknown coding before the
//   final chunked is 501. Content-Length beside Transfer-Encoding is refused by the parser.
// - HTTP/1.1 carries exactly one Host field, HTTP/1.0 at most one, whose value is a valid
//   host[:port] or empty (RFC 9112 3.2).
// Every error is answered and then the connection is closed: its next bytes cannot be trusted.
std::optional<FramingError> CheckFraming(const boost::beast::http::request_header<>& header);

// A request target in absolute-form (http://host[:port]/path?query), which RFC 9112 3.2.2 says
// a server must accept, rewritten in origin-form, its authority in the Host field's place (the
// server must then ignore the Host it received; CheckFraming has checked it). Any other target
// is left as it is: an origin-form one, and absolute-forms of other schemes or with user info,
// which the handler refuses as bad_target.
void ToOriginForm(boost::beast::http::request_header<>& header);

}  // namespace fencekit::httpapi
