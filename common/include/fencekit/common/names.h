// Keys and lock names: the one rule the store, the server and the store client all apply.
#pragma once

#include <cstddef>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit {

inline constexpr std::size_t kMaxNameBytes = 1024;

// OK when `name` is 1..max_bytes bytes, none of them a control character (0x00-0x1F or 0x7F).
// Any other byte is allowed (UTF-8 or not). Control characters are refused so that a name can
// never split a header, a log line or a terminal line; `what` ("key", "lock name") starts the
// kInvalidArgument message.
Status CheckName(std::string_view what, std::string_view name,
                 std::size_t max_bytes = kMaxNameBytes);

inline constexpr std::size_t kMaxServiceIdBytes = 128;

// A lock service's identity (Lease::service, the Fencing-Service header): 1..128 bytes of
// A-Z a-z 0-9 and . _ : - only, so that it travels in a header as it is. Backends make ids like
// "sqlite:<32 hex>", "redis:<32 hex>", "etcd:<cluster id>". kInvalidArgument otherwise.
Status CheckServiceId(std::string_view id);

}  // namespace fencekit
