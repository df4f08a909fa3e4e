// The bytes of a response's status line and header section, as Beast's serializer writes them,
// so that a session can send them and the body in one gathered write without the serializer's
// per-buffer machinery (issue 34: it cost fenced's I/O thread more than the parsing did).
#pragma once

#include <boost/beast/http/message.hpp>
#include <string>

namespace fencekit::httpapi {

// Replaces `out` with "HTTP/X.Y ### <reason>\r\n", every field as "<name>: <value>\r\n" in
// order, and the empty line: byte for byte what Beast's serializer writes before a body.
// The reason is the response's own, or the standard one for its status when it has none.
// REQUIRES: the response is not chunked (its body then goes out as is, after these bytes).
void WriteResponseHead(const boost::beast::http::response_header<>& res, std::string& out);

}  // namespace fencekit::httpapi
