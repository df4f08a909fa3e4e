#!/usr/bin/env bash
# Fair waiting: 4 processes contend for one lock (Acquire + Release in a loop, lock_bench
# contend) for SECONDS, on the embedded SQLite lock service and on a loopback redis-server;
# prints, per round and as medians, the total acquisitions/s and the least- and most-served
# process, with the ratio least/most. With LOCK_BENCH_BASELINE set to another lock_bench
# binary (say, one built from an earlier commit), the baseline runs the same rounds, alternating
# with this build, and the totals' ratio is printed too. Figures: docs/benchmarks.md.
#
# Usage: bench/fairness.sh [seconds, default 6] [rounds, default 3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-6}"
rounds="${2:-3}"
source "$root/bench/lib.sh"
bench="$(find_lock_bench "$root")"
baseline="${LOCK_BENCH_BASELINE:-}"
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }

work="$(mktemp -d)"  # holds the SQLite database: keep TMPDIR on a real disk, not tmpfs
redis_pid=""
cleanup() {
  stop_pids ${redis_pid:+"$redis_pid"}
  rm -rf "$work"
}
on_exit cleanup

port="$(free_port)"
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning \
  >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done

results="$work/results"  # lines: NAME TOTAL MIN MAX
# contend NAME BINARY URI: 4 processes with one common start time; records the total
# acquisitions/s and the least and most any one process got.
contend() {
  local name="$1" bin="$2" uri="$3" pids=() i v total=0 min=-1 max=0 start_at
  rm -f "$work/locks.db"* "$work/locks.db-wake"
  start_at=$(( $(date +%s%3N) + 700 ))  # all four connected before the window opens
  for i in 1 2 3 4; do
    "$bin" contend "$uri" "$secs" --lock fair --start-at-ms "$start_at" >"$work/c$i" 2>"$work/c$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done  # a contender that failed counts as 0
  for i in 1 2 3 4; do
    if [ ! -s "$work/c$i" ]; then
      echo "$name: contender $i failed: $(head -c 500 "$work/c$i.err")" >&2
    fi
  done
  for i in 1 2 3 4; do
    v="$(awk '{print $2+0; exit} END{if (NR==0) print 0}' "$work/c$i")"
    total="$(awk -v a="$total" -v b="$v" 'BEGIN{print a+b}')"
    if [ "$min" = -1 ] || awk -v a="$v" -v b="$min" 'BEGIN{exit !(a<b)}'; then min="$v"; fi
    if awk -v a="$v" -v b="$max" 'BEGIN{exit !(a>b)}'; then max="$v"; fi
  done
  echo "$name $total $min $max" >>"$results"
  printf '%-22s total %7.1f/s  least %6.1f  most %6.1f  least/most %.2f\n' "$name" "$total" \
    "$min" "$max" "$(awk -v a="$min" -v b="$max" 'BEGIN{print (b>0 ? a/b : 0)}')" >&2
}

echo "== fairness: $bench${baseline:+ (baseline $baseline)}; $secs s x $rounds rounds; $(nproc) CPUs" >&2
for round in $(seq "$rounds"); do
  for backend in sqlite redis; do
    if [ "$backend" = sqlite ]; then uri="sqlite://$work/locks.db"; else uri="redis://127.0.0.1:$port"; fi
    if [ -n "$baseline" ] && [ $((round % 2)) -eq 1 ]; then contend "baseline_$backend" "$baseline" "$uri"; fi
    contend "fencekit_$backend" "$bench" "$uri"
    if [ -n "$baseline" ] && [ $((round % 2)) -eq 0 ]; then contend "baseline_$backend" "$baseline" "$uri"; fi
  done
done

echo "== medians over $rounds rounds (acquisitions/s; least/most is the median of each round's ratio)"
for name in $(awk '{print $1}' "$results" | sort -u); do
  total="$(awk -v n="$name" '$1==n {print $2}' "$results" | median)"
  ratio="$(awk -v n="$name" '$1==n {print ($4>0 ? $3/$4 : 0)}' "$results" | median)"
  printf '%-22s total %7.1f/s  least/most %.2f\n' "$name" "$total" "$ratio"
done
if [ -n "$baseline" ]; then
  for backend in sqlite redis; do
    a="$(awk -v n="fencekit_$backend" '$1==n {print $2}' "$results" | median)"
    b="$(awk -v n="baseline_$backend" '$1==n {print $2}' "$results" | median)"
    printf 'throughput %s: fencekit/baseline = %.2f\n' "$backend" "$(awk -v a="$a" -v b="$b" 'BEGIN{print (b>0 ? a/b : 0)}')"
  done
fi
