#include "fencekit/common/names.h"

#include <algorithm>
#include <string>

namespace fencekit {

Status CheckName(std::string_view what, std::string_view name, std::size_t max_bytes) {
  std::string w(what);
  if (name.empty()) return Status::InvalidArgument(w + " is empty; give a non-empty " + w);
  if (name.size() > max_bytes) {
    return Status::InvalidArgument(w + " is " + std::to_string(name.size()) +
                                   " bytes long; the limit is " + std::to_string(max_bytes) +
                                   " bytes");
  }
  auto control = std::find_if(name.begin(), name.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7F;
  });
  if (control != name.end()) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    auto c = static_cast<unsigned char>(*control);
    std::string shown = c == 0
                            ? "a NUL byte"
                            : std::string("the control character %") + kHex[c >> 4] + kHex[c & 15];
    return Status::InvalidArgument(w + " contains " + shown + " at byte " +
                                   std::to_string(control - name.begin()) +
                                   "; control characters (0x00-0x1F, 0x7F) are not allowed in "
                                   "keys or lock names");
  }
  return Status::Ok();
}

Status CheckServiceId(std::string_view id) {
  if (id.empty() || id.size() > kMaxServiceIdBytes) {
    return Status::InvalidArgument("a lock service id is 1 to " +
                                   std::to_string(kMaxServiceIdBytes) + " bytes long");
  }
  bool ok = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
  });
  if (!ok) {
    return Status::InvalidArgument(
        "a lock service id has only A-Z a-z 0-9 . _ : - (as Lease::service gives it)");
  }
  return Status::Ok();
}

}  // namespace fencekit
