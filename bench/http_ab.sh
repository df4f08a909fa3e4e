#!/usr/bin/env bash
# Two (or more) fenced binaries side by side in one run: per round, nginx `return 200` at
# -t2 -c64 and then each fenced at -t2 -c64 with bench/put.lua (durable, accepted PUTs), the
# fenced arms' order rotated every round; medians of the rounds printed. Each fenced keeps its
# own database (in a temp dir) for the whole run. For a before/after of a change to the request
# path on a shared machine: rates swing between rounds, while the per-round ratio to nginx and
# each server's CPU time per request (user + system, from /proc; nginx's worker's) swing less.
# wrk's own CPU per request is printed too: the cores are shared, so the rates go as the inverse
# of the server's and wrk's together.
#
# Usage: bench/http_ab.sh SECONDS ROUNDS FENCED_BINARY...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, start_nginx, stop_pids, on_exit, children_cpu_us
[ $# -ge 3 ] || { echo "usage: bench/http_ab.sh SECONDS ROUNDS FENCED_BINARY..." >&2; exit 2; }
secs="$1"
rounds="$2"
shift 2
bins=("$@")
n=${#bins[@]}
for tool in wrk nginx curl; do
  command -v "$tool" >/dev/null || { echo "http_ab: $tool is not installed (./scripts/bench installs it)" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-http-ab.XXXXXX")"
pids=()
cleanup() {
  stop_pids "${pids[@]}"
  rm -rf "$work"
}
on_exit cleanup

start_nginx

declare -a url pid
for i in $(seq 0 $((n - 1))); do
  mkdir -p "$work/$i"
  "${bins[$i]}" --listen 127.0.0.1:0 --db "$work/$i/bench.db" >"$work/$i/fenced.log" 2>&1 &
  pids+=($!)
  pid[i]=$!
  url[i]="$(fenced_url "$work/$i/fenced.log" "${pid[i]}")"
  [ -n "${url[i]}" ] || { echo "http_ab: ${bins[$i]} did not start:" >&2; cat "$work/$i/fenced.log" >&2; exit 1; }
done
sleep 0.5

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_us=$((1000000 / $(getconf CLK_TCK)))

# run ARM URL PID [wrk args...]: appends "ARM ROUND req/s p99_ms cpu_us_per_request failures
# wrk_cpu_us_per_request".
run() {
  local arm="$1" u="$2" p="$3" c0=0 c1=0
  shift 3
  [ "$p" != - ] && c0="$(cpu_ticks "$p")"
  times >"$work/times.before"
  wrk -t2 -c64 -d"${secs}s" --latency "$@" "$u" >"$work/wrk.out"
  times >"$work/times.after"
  [ "$p" != - ] && c1="$(cpu_ticks "$p")"
  awk -v arm="$arm" -v round="$round" -v cpu_us="$(((c1 - c0) * tick_us))" \
      -v wrk_us="$(children_cpu_us "$work/times.before" "$work/times.after")" '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return v + 0
    }
    /^Requests\/sec:/ { rps = $2 }
    /requests in/ { requests = $1 }
    $1 == "99%" { p99 = ms($2) }
    /Non-2xx or 3xx responses:/ { bad += $NF }
    /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
    END { printf "%s %d %.0f %.2f %.1f %d %.1f\n", arm, round, rps, p99,
                 (requests > 0 ? cpu_us / requests : 0), bad,
                 (requests > 0 ? wrk_us / requests : 0) }' "$work/wrk.out" >>"$work/results"
  tail -n1 "$work/results" >&2
}

for round in $(seq "$rounds"); do
  echo "round $round/$rounds (${secs}s per run)" >&2
  run nginx "http://127.0.0.1:$nginx_port/" "$nginx_worker"
  for j in $(seq 0 $((n - 1))); do
    i=$(((j + round) % n))
    run "$i" "${url[i]}" "${pid[i]}" -s "$root/bench/put.lua"
  done
done

echo
echo "medians of $rounds rounds of ${secs}s each, -t2 -c64 ($(nproc) CPUs, loopback)"
printf "%-40s %9s %8s %11s %11s %14s %9s\n" "arm" "req/s" "p99 ms" "cpu us/req" "wrk us/req" \
  "/nginx, round" "failures"
for arm in nginx $(seq 0 $((n - 1))); do
  name="nginx return 200"
  [ "$arm" != nginx ] && name="${bins[$arm]}"
  col() { awk -v a="$arm" -v c="$1" '$1 == a {print $c}' "$work/results"; }
  ratio="$(awk -v a="$arm" '$1 == "nginx" {n[$2] = $3} $1 == a && n[$2] > 0 {print $3 / n[$2]}' "$work/results" | median)"
  cpu="$(col 5 | median)"
  printf "%-40s %9.0f %8.2f %11s %11s %14.3f %9d\n" "$name" "$(col 3 | median)" "$(col 4 | median)" \
    "$cpu" "$(col 7 | median)" "$ratio" "$(col 6 | awk '{s += $1} END {print s + 0}')"
done
