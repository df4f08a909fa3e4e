// Private: loopback addresses, and one request and its reply over a loopback TCP connection,
// for readiness checks.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace fencekit::procutil {

// 127.0.0.1:`port` (0: any port) as an IPv4 socket address.
sockaddr_in LoopbackAddress(std::uint16_t port);

// Connects to 127.0.0.1:`port`, sends `request` and reads until `complete(reply so far)`, the
// peer closes, or `timeout` passes on one step (a paused server accepts but never answers).
// What was read; "" when the connection or the send failed.
std::string Exchange(std::uint16_t port, std::string_view request,
                     const std::function<bool(const std::string&)>& complete,
                     std::chrono::milliseconds timeout);

// One HTTP/1.1 request (a JSON body unless empty; `authorization`, if not empty, as the
// Authorization header); the body of a 200 reply, else "".
std::string HttpCall(std::uint16_t port, std::string_view method, std::string_view target,
                     std::string_view body, std::chrono::milliseconds timeout,
                     std::string_view authorization = {});

}  // namespace fencekit::procutil
