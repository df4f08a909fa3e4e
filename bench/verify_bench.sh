#!/usr/bin/env bash
# Verification on advance costs one call to the lock service per new holder, not per write:
# durable fenced writes/s through `fenced --verify-with redis://...` beside the same fenced
# without it, in the same run, ROUNDS rounds interleaved; medians and the ratio printed.
# Each wrk thread is one holder with a real grant from the Redis lock service (fencectl acquire):
# its first write advances the fence (one verification call), every later one is at the fence.
#
# Usage: bench/verify_bench.sh [seconds per run, default 10] [rounds, default 3]
#   FENCED, FENCECTL   binaries (default build/bench/tools/{fenced,fencectl})
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, stop_pids, on_exit
fenced="${FENCED:-$root/build/bench/tools/fenced}"
fencectl="${FENCECTL:-$(dirname "$fenced")/fencectl}"
secs="${1:-10}"
rounds="${2:-3}"
for tool in wrk curl redis-server; do
  command -v "$tool" >/dev/null || { echo "verify_bench: $tool is not installed (./scripts/bench installs it)" >&2; exit 1; }
done
for b in "$fenced" "$fencectl"; do
  [ -x "$b" ] || { echo "verify_bench: no binary at $b; build it or set FENCED/FENCECTL" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-verify-bench.XXXXXX")"
pids=()
cleanup() {
  stop_pids "${pids[@]}"
  rm -rf "$work"
}
on_exit cleanup

redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null && break
  sleep 0.05
done
locks="redis://127.0.0.1:$redis_port"

# start_fenced NAME [options]: starts fenced on a free port with its own database; sets url_NAME.
start_fenced() {
  local name="$1"; shift
  "$fenced" --listen 127.0.0.1:0 --db "$work/$name.db" "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do
    grep -q "listening on" "$work/$name.log" && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.05
  done
  local url
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/$name.log" | head -n1)"
  [ -n "$url" ] || { echo "verify_bench: fenced ($name) did not start:" >&2; cat "$work/$name.log" >&2; exit 1; }
  declare -g "url_$name=$url"
}
start_fenced plain
start_fenced verify --verify-with "$locks"

# One real grant per wrk thread (wrk -t2 uses threads 0 and 1), held for the whole run.
json_field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\).*/\1/p"; }
for id in 0 1; do
  grant="$("$fencectl" acquire --locks "$locks" --ttl 1h "bench-holder-$id")"
  export "BENCH_TOKEN_$id=$(json_field token <<<"$grant")"
  BENCH_SERVICE="$(json_field service <<<"$grant")"
done
export BENCH_SERVICE
[ -n "$BENCH_SERVICE" ] || { echo "verify_bench: fencectl acquire printed no service: $grant" >&2; exit 1; }

# verifications URL: fenced's count of calls to the lock service so far (0 when it makes none).
verifications() {
  curl -s "$1/metrics" | awk '$1=="fenced_verifications_total"{v=$2} END{print v+0}'
}

# run NAME CONNECTIONS URL: appends "NAME req/s p99_ms failures".
run() {
  local name="$1" conns="$2" url="$3" threads=2 out="$work/wrk.out"
  [ "$conns" -lt 2 ] && threads=1
  wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/put.lua" "$url" >"$out" &
  pids+=($!)
  wait "${pids[-1]}"
  unset 'pids[-1]'
  awk -v name="$name" '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return v + 0
    }
    /^Requests\/sec:/ { rps = $2 }
    $1 == "99%" { p99 = ms($2) }
    /Non-2xx or 3xx responses:/ { bad += $NF }
    /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
    END { printf "%s %s %s %d\n", name, rps, p99, bad }' "$out" >>"$work/results"
  tail -n1 "$work/results" >&2
}

for round in $(seq "$rounds"); do
  echo "round $round/$rounds (${secs}s per run)" >&2
  # Alternate which goes first, so neither always follows the other's fsync backlog.
  if [ $((round % 2)) -eq 1 ]; then order="plain verify"; else order="verify plain"; fi
  for n in $order; do
    url_var="url_$n"
    run "${n}_c64" 64 "${!url_var}"
    run "${n}_c1" 1 "${!url_var}"
  done
done

col() { awk -v n="$1" -v c="$2" '$1==n{print $c}' "$work/results"; }
echo
echo "Verification on advance: medians of $rounds rounds of ${secs}s each ($(nproc) CPUs, loopback)"
printf "%-44s %10s %9s %9s\n" "run" "req/s" "p99 ms" "failures"
for name in plain_c1 verify_c1 plain_c64 verify_c64; do
  rps="$(col "$name" 2 | median)"
  p99="$(col "$name" 3 | median)"
  bad="$(col "$name" 4 | awk '{s+=$1} END{print s+0}')"
  case "$name" in plain*) what="fenced PUT" ;; *) what="fenced --verify-with redis PUT" ;; esac
  printf "%-44s %10.0f %9.2f %9d\n" "$what, -c${name##*_c}" "$rps" "$p99" "$bad"
  declare "rps_$name=$rps" "bad_$name=$bad"
done
calls="$(verifications "$url_verify")"
echo
awk -v a="$rps_verify_c64" -v b="$rps_plain_c64" -v c="$rps_verify_c1" -v d="$rps_plain_c1" \
    -v calls="$calls" -v bad="$((bad_plain_c1 + bad_verify_c1 + bad_plain_c64 + bad_verify_c64))" 'BEGIN{
  r64 = (b > 0 ? a / b : 0); r1 = (d > 0 ? c / d : 0)
  printf "verify/plain c64: %.3f (target >= 0.9: %s)\n", r64, (r64 >= 0.9 ? "met" : "MISSED")
  printf "verify/plain c1:  %.3f (target >= 0.9: %s)\n", r1, (r1 >= 0.9 ? "met" : "MISSED")
  printf "calls to the lock service over every run: %d (one per holder expected: 2)\n", calls
  if (bad > 0) printf "WARNING: %d requests failed (non-2xx or socket errors)\n", bad
}'
