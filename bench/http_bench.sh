#!/usr/bin/env bash
# Durable fenced writes/s through HTTP: wrk against `fenced` (PUT with a fencing token, every
# write accepted and fsynced) at 1 and 64 connections, and batches of BENCH_BATCH puts under one
# grant (POST /v1/batch) at 64 connections, beside nginx answering `return 200` at 64
# connections as the baseline, all in the same run, ROUNDS rounds interleaved; medians printed.
# Loopback only. Builds nothing: give the fenced binary in $FENCED.
#
# Usage: bench/http_bench.sh [seconds per run, default 10] [rounds, default 3]
#   FENCED=path/to/fenced   (default build/bench/tools/fenced)
#   FENCED_ARGS="..."       extra fenced options, e.g. "--threads 2"
#   BENCH_BATCH=16          puts per batch
#   EVENT_READERS=N         N readers of GET /v1/events (curl) stay connected throughout, so the
#                           write path publishes every decision (default 0: nobody listens)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, start_nginx, stop_pids, on_exit, children_cpu_us
fenced="${FENCED:-$root/build/bench/tools/fenced}"
secs="${1:-10}"
rounds="${2:-3}"
for tool in wrk nginx curl; do
  command -v "$tool" >/dev/null || { echo "http_bench: $tool is not installed (./scripts/bench installs it)" >&2; exit 1; }
done
[ -x "$fenced" ] || { echo "http_bench: no fenced binary at $fenced; build it or set FENCED" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-http-bench.XXXXXX")"
pids=()
cleanup() {
  stop_pids "${pids[@]}"
  rm -rf "$work"
}
on_exit cleanup

start_fenced() {
  # shellcheck disable=SC2086  # FENCED_ARGS is a list of options
  "$fenced" --listen 127.0.0.1:0 --db "$work/bench.db" ${FENCED_ARGS:-} >"$work/fenced.log" 2>&1 &
  pids+=($!)
  fenced_pid=$!
  fenced_url="$(fenced_url "$work/fenced.log" "$fenced_pid")"
  if [ -z "$fenced_url" ]; then
    echo "http_bench: fenced did not start:" >&2
    cat "$work/fenced.log" >&2
    exit 1
  fi
  local i
  for i in $(seq "${EVENT_READERS:-0}"); do
    curl -sN "$fenced_url/v1/events" >/dev/null &
    pids+=($!)
  done
}

start_nginx
start_fenced
sleep 0.5

# The sum and count of fenced_commit_batch_size, to get the mean writes per commit of one run.
batch_counters() {
  curl -s "$fenced_url/metrics" |
    awk '$1=="fenced_commit_batch_size_sum"{s=$2} $1=="fenced_commit_batch_size_count"{c=$2} END{print s+0, c+0}'
}

# A server's CPU time so far (user + system), in clock ticks: less swayed by a busy machine than
# its rate. fenced's, or nginx's worker's.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_us=$((1000000 / $(getconf CLK_TCK)))

# run NAME CONNECTIONS URL [wrk args...]: appends "NAME req/s p99_ms failures writes/commit
# cpu_us_per_request wrk_cpu_us_per_request".
run() {
  local name="$1" conns="$2" url="$3"; shift 3
  local threads=2 out="$work/wrk.out" before=(0 0) after=(0 0) cpu0=0 cpu1=0
  [ "$conns" -lt 2 ] && threads=1  # wrk needs at least one connection per thread
  case "$name" in
    fenced*) read -r -a before < <(batch_counters); cpu0="$(cpu_ticks "$fenced_pid")" ;;
    nginx*) cpu0="$(cpu_ticks "$nginx_worker")" ;;
  esac
  times >"$work/times.before"
  wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "$@" "$url" >"$out" &
  pids+=($!)
  wait "${pids[-1]}"
  times >"$work/times.after"
  unset 'pids[-1]'
  case "$name" in
    fenced*) read -r -a after < <(batch_counters); cpu1="$(cpu_ticks "$fenced_pid")" ;;
    nginx*) cpu1="$(cpu_ticks "$nginx_worker")" ;;
  esac
  cp "$out" "$work/$name.round$round.txt"
  awk -v name="$name" -v ws="$((after[0] - before[0]))" -v wc="$((after[1] - before[1]))" \
      -v cpu_us="$(((cpu1 - cpu0) * tick_us))" -v secs="$secs" \
      -v wrk_us="$(children_cpu_us "$work/times.before" "$work/times.after")" '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /m$/)  { sub(/m$/, "", v);  return v * 60000 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return v + 0
    }
    /^Requests\/sec:/ { rps = $2 }
    /requests in/ { requests = $1 }
    $1 == "99%" { p99 = ms($2) }
    /^non_2xx=/ { split($0, a, "="); lua_bad = a[2]; lua = 1 }
    /Non-2xx or 3xx responses:/ { wrk_bad = $NF }
    /Socket errors:/ { gsub(/,/, ""); sock_bad = $4 + $6 + $8 + $10 }
    END {
      bad = sock_bad + (lua ? lua_bad : wrk_bad)
      printf "%s %s %s %d %s %s %s\n", name, rps, p99, bad, (wc > 0 ? sprintf("%.1f", ws / wc) : "-"),
             (cpu_us > 0 && requests > 0 ? sprintf("%.1f", cpu_us / requests) : "-"),
             (wrk_us > 0 && requests > 0 ? sprintf("%.1f", wrk_us / requests) : "-")
    }' "$out" >>"$work/results"
  tail -n1 "$work/results" >&2
}

for round in $(seq "$rounds"); do
  echo "round $round/$rounds (${secs}s per run)" >&2
  run nginx_c64 64 "http://127.0.0.1:$nginx_port/"
  run fenced_c1 1 "$fenced_url" -s "$root/bench/put.lua"
  run fenced_c64 64 "$fenced_url" -s "$root/bench/put.lua"
  run fenced_batch_c64 64 "$fenced_url" -s "$root/bench/batch.lua"
done
batch="${BENCH_BATCH:-16}"

col() { awk -v n="$1" -v c="$2" '$1==n{print $c}' "$work/results"; }

echo
echo "HTTP: medians of $rounds rounds of ${secs}s each ($(nproc) CPUs, loopback)"
printf "%-34s %10s %9s %9s %13s %11s %11s\n" "run" "req/s" "p99 ms" "failures" "writes/commit" \
  "cpu us/req" "wrk us/req"
declare -A label=(
  [nginx_c64]="nginx return 200, -t2 -c64"
  [fenced_c1]="fenced PUT, -t1 -c1"
  [fenced_c64]="fenced PUT, -t2 -c64"
  [fenced_batch_c64]="fenced batch of $batch, -t2 -c64"
)
for name in nginx_c64 fenced_c1 fenced_c64 fenced_batch_c64; do
  rps="$(col "$name" 2 | median)"
  p99="$(col "$name" 3 | median)"
  bad="$(col "$name" 4 | awk '{s+=$1} END{print s+0}')"
  wpc="$(col "$name" 5 | awk '$1 != "-"' | median)"
  cpu="$(col "$name" 6 | awk '$1 != "-"' | median)"
  wrk_cpu="$(col "$name" 7 | awk '$1 != "-"' | median)"
  [ "$name" = nginx_c64 ] && wpc="-"
  printf "%-34s %10.0f %9.2f %9d %13s %11s %11s\n" "${label[$name]}" "$rps" "$p99" "$bad" "$wpc" \
    "${cpu:--}" "${wrk_cpu:--}"
  declare "rps_$name=$rps" "p99_$name=$p99" "bad_$name=$bad" "cpu_$name=${cpu:--}" \
    "wrk_$name=${wrk_cpu:--}"
done
echo
awk -v fc="${cpu_fenced_c64/-/0}" -v nc="${cpu_nginx_c64/-/0}" -v fw="${wrk_fenced_c64/-/0}" -v nw="${wrk_nginx_c64/-/0}" -v cpus="$(nproc)" -v f="$rps_fenced_c64" -v n="$rps_nginx_c64" -v p="$p99_fenced_c64" -v b="$rps_fenced_batch_c64" -v size="$batch" -v bad="$((bad_fenced_c1 + bad_fenced_c64 + bad_fenced_batch_c64))" 'BEGIN{
  printf "fenced c64 writes/s: %.0f (target >= 30000: %s)\n", f, (f >= 30000 ? "met" : sprintf("MISSED, %.0f%% of it", 100 * f / 30000))
  printf "fenced c64 p99:      %.2f ms (target <= 10 ms: %s)\n", p, (p <= 10 ? "met" : "MISSED")
  printf "fenced/nginx c64:    %.3f (target >= 0.5: %s)\n", (n > 0 ? f / n : 0), (n > 0 && f / n >= 0.5 ? "met" : "not met")
  if (fc > 0 && nc > 0) printf "CPU per request c64:  fenced %.1f us, nginx %.1f us: %.1fx (no target; the rates above share the CPUs with wrk)\n", fc, nc, fc / nc
  # The rates share the cores with wrk: fenced/nginx = (nginx + wrk) / (fenced + wrk) CPU per
  # request, times the share of the cores each run keeps busy (fenced waits on fsyncs too).
  if (fc > 0 && nc > 0 && fw > 0 && nw > 0) {
    printf "  counting wrk:       fenced + wrk %.1f us, nginx + wrk %.1f us: %.3f; the cores busy %.0f%% against %.0f%%\n", fc + fw, nc + nw, (nc + nw) / (fc + fw), 100 * f * (fc + fw) / 1e6 / cpus, 100 * n * (nc + nw) / 1e6 / cpus
    printf "  0.5 at equal use of the cores needs fenced at %.1f us per request\n", 2 * (nc + nw) - fw
  }
  printf "batch c64 writes/s:  %.0f, %.1fx single PUTs (target >= 3x: %s)\n", b * size, (f > 0 ? b * size / f : 0), (b * size >= 3 * f ? "met" : "MISSED")
  if (bad > 0) printf "WARNING: %d fenced requests failed (non-2xx or socket errors)\n", bad
}'
