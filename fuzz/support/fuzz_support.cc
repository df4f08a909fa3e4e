#include "support/fuzz_support.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace fencekit::fuzz {

void Fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  if (!detail.empty()) {
    std::string shown = Printable(detail, 2000);
    std::fprintf(stderr, "  detail: %s\n", shown.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

std::string Printable(std::string_view bytes, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (bytes.size() > max) out += "...(" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

namespace {

struct TempDir {
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fencekit-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      Fail("cannot make a temporary folder", pattern + ": " + std::strerror(errno));
    }
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

}  // namespace

const std::string& ProcessTempDir() {
  static TempDir dir;
  return dir.path;
}

void EnterPrivateNetwork() {
  if (::unshare(CLONE_NEWNET) == 0) return;
  int first = errno;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) return;
  Fail(
      "cannot enter a private network namespace (unshare(CLONE_NEWNET) and, in a new user "
      "namespace, both refused)",
      std::string(std::strerror(first)) + " / " + std::strerror(errno) +
          "; run this target as root or where unprivileged user namespaces are allowed");
}

}  // namespace fencekit::fuzz
