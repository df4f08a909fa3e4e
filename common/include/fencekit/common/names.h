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

}  // namespace fencekit
