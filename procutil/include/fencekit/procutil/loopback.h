// Loopback ports for servers started by tests and tools.
#pragma once

#include <cstdint>
#include <functional>

#include "fencekit/common/status.h"

namespace fencekit::procutil {

// A loopback TCP port nobody listened on at the moment of the call. Another process may take
// it before the caller's server binds it; the servers here retry with a new one then.
Result<std::uint16_t> FreeLoopbackPort();

// Starts a server on `fixed`, or, when it is 0, on a free port, trying up to five ports while
// `start_on` says the port was taken (it sets *port_taken). Sets *port to the port tried last.
Status StartOnLoopbackPort(std::uint16_t fixed, std::uint16_t* port,
                           const std::function<Status(bool* port_taken)>& start_on);

}  // namespace fencekit::procutil
