// Opening a store in a test, and tokens from a test's literals. Header-only: for tests that link
// fencekit::fencedstore (the support library does not).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "fencekit/fencedstore/store.h"
#include "support/test_support.h"

namespace fencekit::testing {

// `v` (>= 1) as a token.
inline FencingToken TokenOf(std::int64_t v) { return FencingToken::FromInt(v).value(); }

// A store opened with `options`; throws, failing the test, when it cannot be opened.
inline std::unique_ptr<FencedStore> OpenStore(StoreOptions options) {
  return ValueOrThrow(FencedStore::Open(std::move(options)), "opening the store");
}

}  // namespace fencekit::testing
