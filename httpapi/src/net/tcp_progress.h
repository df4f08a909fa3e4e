// TcpProgress: what a peer's TCP has taken of the bytes sent to it. An event stream writes a
// heartbeat now and then; the write completes as soon as the bytes are in the kernel, so only
// the kernel can tell whether the peer still takes them. A peer that stopped reading fills its
// receive window and acknowledges nothing more; a peer that is gone acknowledges nothing at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace fencekit::httpapi {

struct TcpSendState {
  std::uint64_t acked = 0;  // bytes the peer acknowledged since the connection opened
  std::size_t queued = 0;   // bytes sent or waiting to be sent, not yet acknowledged
};

// The state of connected TCP socket `fd`; nullopt when the kernel does not say (not TCP).
std::optional<TcpSendState> ReadTcpSendState(int fd);

}  // namespace fencekit::httpapi
