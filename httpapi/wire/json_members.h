// JSON bodies whose objects name a member twice: RFC 8259 leaves their meaning to the receiver,
// and a parser that keeps the last (Boost.JSON's) reads them otherwise than one that keeps the
// first. fenced refuses them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fencekit::wire {

// The first member name that appears twice in one object of `json` (escapes decoded: "a" and
// "\u0061" are the same name), or nullopt when there is none or `json` does not parse (the
// caller's parse says why). One pass, memory bounded by the body.
std::optional<std::string> DuplicateMember(std::string_view json);

}  // namespace fencekit::wire
