// The files of fencekit-demo --serve's page (demos/page/), compiled in by
// httpapi/ui/embed.cmake: the page at "/", each other file at "/<its name>".
#pragma once

#include <span>
#include <string_view>

namespace fencekit::demo {

struct PageAsset {
  std::string_view path;
  std::string_view content_type;  // with its charset
  std::string_view body;
};

std::span<const PageAsset> PageAssets();

// The file served at `path`; null when none is.
inline const PageAsset* FindPageAsset(std::string_view path) {
  for (const PageAsset& a : PageAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace fencekit::demo
