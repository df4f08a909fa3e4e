#!/usr/bin/env bash
# What a user does with fencekit, checked end to end:
#  1. cmake --install the build into a temporary prefix: the guard SQL and the Redis function
#     library come along (share/fencekit/sql/, share/fencekit/lua/), and a Release build's
#     libraries carry no debug info;
#  2. build tests/consumer (which names no C++ standard: the targets require C++20 themselves)
#     against it with find_package(fencekit CONFIG REQUIRED), and run it;
#  3. run it on the default lock service, which the installed fencectl then sees;
#  4. build the same program with nothing but pkg-config's flags, and run it;
#  5. configure tests/consumer with fencekit as a subdirectory where GoogleTest and Google
#     Benchmark cannot be found (they must not be needed);
#  6. docs/lock-client.md shows tests/consumer/main.cc as it is.
# Usage: check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source_dir="$2"
work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-consumer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "$*" >&2
  exit 1
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
for sql in postgresql-guard.sql mariadb-guard.sql sqlite-guard.sql; do
  cmp -s "$source_dir/fencedstore/sql/$sql" "$work/prefix/share/fencekit/sql/$sql" ||
    fail "cmake --install did not install fencedstore/sql/$sql as share/fencekit/sql/$sql"
done
cmp -s "$source_dir/fencedstore/lua/fencekit.lua" "$work/prefix/share/fencekit/lua/fencekit.lua" ||
  fail "cmake --install did not install fencedstore/lua/fencekit.lua as share/fencekit/lua/"
echo "cmake --install: share/fencekit/sql/ holds the guard SQL, share/fencekit/lua/ the Redis library"
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
if [ "$build_type" = Release ]; then
  for lib in "$work"/prefix/lib/libfencekit_*.a; do
    if readelf -S --wide "$lib" | grep -q '\.debug_info'; then
      fail "the installed Release library $(basename "$lib") carries debug info"
    fi
  done
  echo "cmake --install: the Release libraries carry no debug info"
fi
# The build's own compile flags: a program that links a sanitizer build's libraries (the debug
# preset) needs the same instrumentation and runtime; empty for the release build.
flags="$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$build/CMakeCache.txt")"

cmake -S "$source_dir/tests/consumer" -B "$work/find" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$work/find" >/dev/null
out="$("$work/find/consumer" "sqlite://$work/locks.db")"
[ "$out" = "token 1" ] || fail "find_package consumer printed '$out', not 'token 1'"
echo "find_package(fencekit): $out ($(du -k "$work/find/consumer" | cut -f1) KiB)"

# The default lock service: the program's (LockClient::Open("")) is fencectl's.
state=(env -u FENCEKIT_LOCKS XDG_STATE_HOME="$work/state")
out="$("${state[@]}" "$work/find/consumer")"
[ "$out" = "token 1" ] || fail "on the default lock service the consumer printed '$out'"
seen="$("${state[@]}" "$work/prefix/bin/fencectl" inspect report)"
[[ "$seen" == *'"last_token":1'* ]] ||
  fail "fencectl inspect does not see the consumer's lock on the default service: $seen"
echo "LockClient::Open(\"\"): fencectl's default lock service ($work/state/fencekit/locks.db)"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
# shellcheck disable=SC2046,SC2086  # pkg-config's flags and $flags are words on purpose
c++ -O1 $flags -o "$work/pc-consumer" "$source_dir/tests/consumer/main.cc" \
  $(pkg-config --cflags --libs fencekit)
out="$("$work/pc-consumer" "sqlite://$work/locks.db")"
[ "$out" = "token 2" ] || fail "pkg-config consumer printed '$out', not 'token 2'"
echo "pkg-config fencekit: $out"

cmake -S "$source_dir/tests/consumer" -B "$work/sub" -G Ninja \
  -DFENCEKIT_SOURCE_DIR="$source_dir" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON --no-warn-unused-cli >/dev/null
grep -q '^FENCEKIT_BUILD_TESTS:BOOL=OFF' "$work/sub/CMakeCache.txt"
echo "add_subdirectory(fencekit): configures without GoogleTest or Google Benchmark"

# The first program of docs/lock-client.md is this one, line for line.
python3 - "$source_dir/docs/lock-client.md" "$source_dir/tests/consumer/main.cc" <<'PY' ||
import sys
doc, program = (open(p).read() for p in sys.argv[1:])
sys.exit(0 if "```cpp\n" + program + "```\n" in doc else 1)
PY
  fail "docs/lock-client.md does not show tests/consumer/main.cc as it is"
echo "docs/lock-client.md shows tests/consumer/main.cc"
