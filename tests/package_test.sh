#!/usr/bin/env bash
# The Debian package (cmake/package.cmake) installs, works and removes cleanly on this machine:
# built from BUILD (the build folder, $1) with cpack, installed with apt-get, checked (the
# programs, the man pages, the systemd unit, the settings, the libraries' CMake and pkg-config
# files), then purged, leaving none of its files. Needs root (or sudo); installs system-wide.
set -euo pipefail
build="$1"
root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
fail() { echo "package_test: $*" >&2; exit 1; }

cmake --build "$build" --target fencekit_man >/dev/null
rm -f "$build"/fencekit_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb="$(ls "$build"/fencekit_*_"$(dpkg --print-architecture)".deb)"
version="$(dpkg-deb -f "$deb" Version)"
[ -n "$version" ] || fail "no version in $deb"

trap 'root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fencekit >/dev/null 2>&1 || true' EXIT
root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$deb" >/dev/null

# The programs, on the PATH, say the package's version.
[ "$(/usr/bin/fenced --version)" = "fenced $version" ] || fail "fenced --version: $(/usr/bin/fenced --version)"
/usr/bin/fencectl --version | grep -qx "fencectl $version" || fail "fencectl --version"
/usr/bin/fencekit-demo --version | grep -qx "fencekit-demo $version" || fail "fencekit-demo --version"
# Their man pages.
for prog in fenced fencectl fencekit-demo; do
  page="$(man -w "$prog")" || fail "no man page for $prog"
  # Made from this build's --help and --version: its version in the title, a description.
  zcat "$page" | grep -q "^\.TH .* \"$prog $version\"" || fail "$page: not $prog $version"
  zcat "$page" | grep -q '^\.SH DESCRIPTION' || fail "$page has no description"
done
# The service: its unit verifies, its settings are a conffile, nothing is enabled or started.
unit=/usr/lib/systemd/system/fenced.service
[ -f "$unit" ] || unit=/lib/systemd/system/fenced.service
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
grep -q '^FENCED_DB=/var/lib/fenced/fenced.db$' /etc/default/fenced || fail "/etc/default/fenced"
dpkg-query -W -f='${Conffiles}\n' fencekit | grep -q '/etc/default/fenced' ||
  fail "/etc/default/fenced is not a conffile"
# The libraries for a user's build: CMake and pkg-config find them.
[ -f /usr/lib/cmake/fencekit/fencekitConfig.cmake ] || fail "no fencekitConfig.cmake"
[ "$(pkg-config --modversion fencekit)" = "$version" ] || fail "pkg-config fencekit"
ls /usr/share/fencekit/sql/postgresql-guard.sql /usr/share/fencekit/lua >/dev/null
# fenced runs from the package: it serves and stops.
dir="$(mktemp -d)"
/usr/bin/fenced --listen 127.0.0.1:0 --db "$dir/store.db" --port-file "$dir/port" \
  >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$(cat "$dir/port")/healthz" >/dev/null || fail "fenced: $(cat "$dir/log")"
kill "$pid"
wait "$pid" || true
rm -rf "$dir"

files="$(dpkg -L fencekit | grep -v '/$' || true)"
root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fencekit >/dev/null
trap - EXIT
# Purged: none of its files is left.
left=""
for f in $files; do [ -e "$f" ] && [ ! -d "$f" ] && left="$left $f"; done
[ -z "$left" ] || fail "left after purge:$left"
! dpkg-query -W fencekit >/dev/null 2>&1 || dpkg-query -W -f='${Status}' fencekit | grep -q 'not-installed' ||
  fail "still known to dpkg"
echo "package_test: $deb installed, checked and purged"
