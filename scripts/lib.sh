# Shared by scripts/demo, scripts/test and scripts/bench: install what is missing, then build.
# Sourced, not run.
set -euo pipefail

FENCEKIT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$FENCEKIT_ROOT/build/release"

# Debian 12 packages the build and the tests need.
FENCEKIT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-program-options1.81-dev
  libsqlite3-dev libhiredis-dev redis-server etcd-server libgtest-dev libgmock-dev libbenchmark-dev
  curl sqlite3 zlib1g-dev
  libssl-dev openssl  # TLS (fenced --tls-cert, https:// clients) and SHA-256 of bearer tokens
  postgresql-15 libpq-dev  # the guard as SQL, tested on a real PostgreSQL server
  mariadb-server mariadb-client  # the MariaDB guard, tested on a real server
  libzookeeper-mt-dev zookeeper  # zk:// locks: the C client, and ensembles of real servers (Java)
  chromium  # headless: the /ui page (driven over its DevTools pipe) and the demo's HTML timeline
  python3 python3-yaml  # tests/openapi_check.py reads docs/openapi.yaml
  prometheus  # promtool checks fenced's /metrics in the suite
  nodejs  # npm: the OpenAPI linter in the suite (tests/lint/), never in the product
)
# ./scripts/demo: what building fencekit-demo, fenced and fencectl needs, and redis-server for
# the scenarios that start their own Redis (scripts/test installs the rest).
FENCEKIT_DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-program-options1.81-dev
  libsqlite3-dev libhiredis-dev libssl-dev libpq-dev libzookeeper-mt-dev redis-server
)
# scripts/package: the man pages are made from the programs' --help.
FENCEKIT_PACKAGE_PACKAGES=(help2man dpkg-dev man-db systemd)
# scripts/fuzz (and scripts/test, which runs it briefly): clang and its libFuzzer runtime.
FENCEKIT_FUZZ_PACKAGES=(clang-16 libclang-rt-16-dev)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_packages PKG...: installs the packages that are not installed yet.
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing ${#missing[@]} Debian packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # A line per package as it is fetched and set up: never a long silence.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o Dpkg::Progress-Fancy=0 "${missing[@]}" |
      { grep --line-buffered -E '^(Get:|Setting up)' || true; } |
      sed -u -E 's/^Get:[0-9]+ [^ ]+ [^ ]+ [^ ]+ ([^ ]+) .*/   fetched \1/; s/^Setting up ([^ ]+) .*/   set up \1/'
  fi
}

# ensure_disk_space GIB WHAT: stops, saying why, when the file system of the project or of
# $TMPDIR (where the tests keep their servers' data) has less than GIB GiB free. A full disk
# otherwise shows up as servers that exit at start and compilers that cannot write.
# FENCEKIT_MIN_FREE_GIB replaces GIB; 0 skips the check.
ensure_disk_space() {
  local need="${FENCEKIT_MIN_FREE_GIB:-$1}" what="$2" dir free
  [ "$need" = 0 ] && return 0
  for dir in "$FENCEKIT_ROOT" "${TMPDIR:-/tmp}"; do
    free="$(df -Pk "$dir" | awk 'NR == 2 { print int($4 / 1048576) }')"
    if [ "$free" -lt "$need" ]; then
      echo "$(basename "$0"): $free GiB free on the file system of $dir; $what needs about" \
        "$need GiB (builds, and the data of the servers the tests start). Free some space, or" \
        "set FENCEKIT_MIN_FREE_GIB=0 to run anyway." >&2
      exit 1
    fi
  done
}

# build: the programs and the tests, configuring build/release first, or again when
# ./scripts/demo configured it without the tests. The benchmarks build in build/bench
# (scripts/bench); --full's thread-safety build compiles them too.
build() {
  cd "$FENCEKIT_ROOT"
  if [ ! -f "$BUILD_DIR/build.ninja" ] ||
    grep -q '^FENCEKIT_BUILD_TESTS:BOOL=OFF' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    echo "== configuring build/release with the tests"
    cmake --preset release -DFENCEKIT_BUILD_TESTS=ON -DFENCEKIT_BUILD_BENCH=OFF >/dev/null
  fi
  echo "== building the programs and the tests"
  cmake --build --preset release -j "$(nproc)"
}

# build_programs: fencekit-demo, fenced and fencectl only (./scripts/demo), with ninja's progress
# on the terminal. A first configure leaves the tests out (they need packages the demo does not
# install); build() adds them.
build_programs() {
  cd "$FENCEKIT_ROOT"
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    echo "== configuring build/release"
    cmake --preset release -DFENCEKIT_BUILD_TESTS=OFF -DFENCEKIT_BUILD_BENCH=OFF >/dev/null
  fi
  echo "== building fencekit-demo, fenced and fencectl"
  cmake --build --preset release -j "$(nproc)" --target fencekit-demo fenced fencectl
}

# build_preset PRESET [TARGET...]: configures build/PRESET once, then builds the targets (default:
# the preset's own) at the lowest CPU and I/O priority, as the sanitizer builds take long on a
# shared machine.
build_preset() {
  local preset="$1" dir="$FENCEKIT_ROOT/build/$1"
  shift
  cd "$FENCEKIT_ROOT"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake --preset "$preset" >/dev/null
  fi
  local targets=()
  [ "$#" -gt 0 ] && targets=(--target "$@")
  nice -n 19 ionice -c 3 cmake --build --preset "$preset" -j "$(nproc)" "${targets[@]}"
}

# Sanitizer stacks with function names and lines: clang-16's symbolizer, else the system's.
use_symbolizer() {
  local s
  for s in /usr/lib/llvm-16/bin/llvm-symbolizer /usr/bin/llvm-symbolizer; do
    if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH="$s"; fi
  done
}
