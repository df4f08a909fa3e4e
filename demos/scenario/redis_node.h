// clock-jump's view of one Redis node: who holds the demo's lock there, and the deletion that
// stands for the node's clock jumping forward. Talks to the node itself (hiredis).
#pragma once

#include <cstdint>
#include <string>

#include "fencekit/common/status.h"

namespace fencekit::demo {

// The owner id of the lock key `lock` on the node at 127.0.0.1:`port` ("" when no one holds
// it there). The backend stores "owner:token" under "fencekit:{lock}:lock".
Result<std::string> NodeHolder(std::uint16_t port, const std::string& lock);
// Deletes that key, as the key's early expiry would.
Status DeleteLockKey(std::uint16_t port, const std::string& lock);

}  // namespace fencekit::demo
