#!/usr/bin/env bash
# What a user does with fencekit, checked end to end:
#  1. cmake --install the build into a temporary prefix;
#  2. build tests/consumer against it with find_package(fencekit CONFIG REQUIRED), and run it;
#  3. build the same program with nothing but pkg-config's flags, and run it;
#  4. configure tests/consumer with fencekit as a subdirectory where GoogleTest and Google
#     Benchmark cannot be found (they must not be needed).
# Usage: check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source_dir="$2"
work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-consumer.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The build's own compile flags: a program that links a sanitizer build's libraries (the debug
# preset) needs the same instrumentation and runtime; empty for the release build.
flags="$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$build/CMakeCache.txt")"

cmake -S "$source_dir/tests/consumer" -B "$work/find" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$work/find" >/dev/null
out="$("$work/find/consumer" "sqlite://$work/locks.db")"
[ "$out" = "token 1" ] || { echo "find_package consumer printed '$out', not 'token 1'" >&2; exit 1; }
echo "find_package(fencekit): $out"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046,SC2086  # pkg-config's flags and $flags are words on purpose
c++ -O1 $flags -o "$work/pc-consumer" "$source_dir/tests/consumer/main.cc" \
  $(pkg-config --cflags --libs fencekit)
out="$("$work/pc-consumer" "sqlite://$work/locks.db")"
[ "$out" = "token 2" ] || { echo "pkg-config consumer printed '$out', not 'token 2'" >&2; exit 1; }
echo "pkg-config fencekit: $out"

cmake -S "$source_dir/tests/consumer" -B "$work/sub" -G Ninja \
  -DFENCEKIT_SOURCE_DIR="$source_dir" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON --no-warn-unused-cli >/dev/null
grep -q '^FENCEKIT_BUILD_TESTS:BOOL=OFF' "$work/sub/CMakeCache.txt"
echo "add_subdirectory(fencekit): configures without GoogleTest or Google Benchmark"
