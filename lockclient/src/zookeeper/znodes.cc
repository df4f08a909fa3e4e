#include "zookeeper/znodes.h"

#include <algorithm>
#include <cctype>

namespace fencekit::lockclient::zk {
namespace {

constexpr std::string_view kHexDigits = "0123456789abcdef";
constexpr std::string_view kMarker = "-lock-";

}  // namespace

std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 15];
  }
  return out;
}
std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    out += static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1]));
  }
  return out;
}

std::string Escape(std::string_view lock) {
  std::string out;
  for (unsigned char c : lock) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += static_cast<char>(std::toupper(kHexDigits[c >> 4]));
      out += static_cast<char>(std::toupper(kHexDigits[c & 15]));
    }
  }
  return out;
}

std::string OwnerOf(const std::string& child) {
  const auto at = child.find(kMarker);
  return at == std::string::npos ? "" : Unhex(child.substr(0, at));
}
std::string SequenceOf(const std::string& child) {
  return child.size() >= 10 ? child.substr(child.size() - 10) : child;
}
void SortLine(std::vector<std::string>& children) {
  children.erase(std::remove_if(children.begin(), children.end(),
                                [](const std::string& c) {
                                  return c.find(kMarker) == std::string::npos;
                                }),
                 children.end());
  std::sort(children.begin(), children.end(), [](const std::string& a, const std::string& b) {
    return SequenceOf(a) < SequenceOf(b);
  });
}

std::string ContenderPrefix(std::string_view owner) { return Hex(owner) + std::string(kMarker); }

}  // namespace fencekit::lockclient::zk
