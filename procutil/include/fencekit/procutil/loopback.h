// Loopback ports for servers started by tests and tools.
#pragma once

#include <cstdint>

#include "fencekit/common/status.h"

namespace fencekit::procutil {

// A loopback TCP port nobody listened on at the moment of the call. Another process may take
// it before the caller's server binds it; the servers here retry with a new one then.
Result<std::uint16_t> FreeLoopbackPort();

}  // namespace fencekit::procutil
