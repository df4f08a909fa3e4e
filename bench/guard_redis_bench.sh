#!/usr/bin/env bash
# The Redis guard's cost: FCALL fencekit_set (fencedstore/lua/fencekit.lua) against a plain SET
# of the same key, on one loopback redis-server started here, by redis-benchmark. The two take
# turns, round after round; medians and the ratio (plain / guarded requests per second: how
# many times slower the guarded write is) printed, and the same for the server's own time per
# call (INFO commandstats). Figures: docs/benchmarks.md.
#
# Usage: bench/guard_redis_bench.sh [requests per run, default 200000] [rounds, default 3]
# Environment:
#   CLIENTS     redis-benchmark's connections (default 50, its own default); -P 1: no pipelining
#   REDIS_ARGS  extra redis-server arguments, e.g. "--appendonly yes --appendfsync always"
#               (default: no persistence, so the figures are the function's cost alone)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-200000}"
rounds="${2:-3}"
clients="${CLIENTS:-50}"
source "$root/bench/lib.sh"
for b in redis-server redis-cli redis-benchmark; do
  command -v "$b" >/dev/null || { echo "$b not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

work="$(mktemp -d)"
pid=""
cleanup() {
  stop_pids ${pid:+"$pid"}
  rm -rf "$work"
}
on_exit cleanup

port="$(free_port)"
# shellcheck disable=SC2086
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  ${REDIS_ARGS:-} >"$work/redis.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  redis-cli -p "$port" PING >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -p "$port" -x FUNCTION LOAD REPLACE <"$root/fencedstore/lua/fencekit.lua" >/dev/null

# run NAME STAT COMMAND...: one redis-benchmark run; appends "NAME requests_per_second
# server_usec_per_call", the latter from INFO commandstats' STAT line (reset before the run):
# the server's own time per command, which the client's share of the 2 cores does not sway.
run() {
  local name="$1" stat="$2"; shift 2
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  redis-benchmark -p "$port" -n "$n" -c "$clients" -P 1 --csv "$@" >"$work/out"
  local usec
  usec="$(redis-cli -p "$port" INFO commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_$stat:.*usec_per_call=\([0-9.]*\).*/\1/p")"
  awk -F'"' -v n="$name" -v u="$usec" 'NR==2 {print n, $4, u}' "$work/out" >>"$work/results"
}
: >"$work/results"
for _ in $(seq "$rounds"); do
  run set set SET '{l}d' v
  run fcall fcall FCALL fencekit_set 2 '{l}f' '{l}d' 5 v
done
set_rps="$(awk '$1=="set" {print $2}' "$work/results" | median)"
fcall_rps="$(awk '$1=="fcall" {print $2}' "$work/results" | median)"
echo "requests=$n clients=$clients rounds=$rounds redis=$(redis-server --version | awk '{print $3}' | cut -d= -f2)"
set_us="$(awk '$1=="set" {print $3}' "$work/results" | median)"
fcall_us="$(awk '$1=="fcall" {print $3}' "$work/results" | median)"
echo "per run (name requests/s server_us/call): $(tr '\n' ';' <"$work/results")"
awk -v a="$set_rps" -v b="$fcall_rps" 'BEGIN {
  printf "SET %.0f/s  FCALL fencekit_set %.0f/s  ratio (SET/FCALL) %.2fx (target <= 1.2x: %s)\n",
         a, b, a / b, (a / b <= 1.2 ? "met" : "not met") }'
printf 'server time per call: SET %.2f us  FCALL fencekit_set %.2f us  ratio %.2fx\n' \
  "$set_us" "$fcall_us" "$(awk -v a="$set_us" -v b="$fcall_us" 'BEGIN {print b / a}')"
