#!/usr/bin/env bash
# etcd lock cycles/s: fencekit's etcd backend (TryAcquire + Release) beside the same cycle made
# with raw gateway calls, against one loopback etcd started here. Each round is one
# `lock_bench etcd-paired` run, which takes the two in turns of 20 cycles, so both see the same
# etcd (its history grows and its fsync times drift over a run); medians and same-round ratios
# printed.
# Also 4 contending processes (Acquire + Release, waiting in etcd's line). Figures and what they
# mean: docs/benchmarks.md.
#
# Usage: bench/etcd_bench.sh [seconds per run, default 4] [rounds, default 5]
# Environment:
#   LOCK_BENCH  the lock_bench binary (default: the most recently built of
#               build/{bench,lockbench}/bench/lock_bench, build/release/bench/lock_bench)
#   ETCD_DIR    where etcd keeps its data (default: a temp folder). Its fsync cost sets the rate:
#               keep it on the disk you mean to measure, not tmpfs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-4}"
rounds="${2:-5}"

source "$root/bench/lib.sh"
bench="$(find_lock_bench "$root")"
command -v etcd >/dev/null || { echo "etcd not found (apt-get install etcd-server)" >&2; exit 1; }

work="$(mktemp -d)"
data="${ETCD_DIR:-$work/etcd}"
etcd_pid=""
cleanup() {
  stop_pids ${etcd_pid:+"$etcd_pid"}
  rm -rf "$work"
}
on_exit cleanup

start_etcd "$data" "$work/etcd.log"
uri="etcd://127.0.0.1:$port"

results="$work/results"  # lines: NAME ROUND PER_SECOND P50_US
record() {
  local line="$2"
  [ -n "$line" ] || line="x 0"
  awk -v n="$1" -v r="$round" '{p50=0; for (i=3;i<=NF;++i) if ($i ~ /^p50_us=/) {p50=substr($i,8)}
    print n, r, $2+0, p50; exit}' <<<"$line" >>"$results"
}
contend() {  # 4 processes on one lock, one common start time; records their total
  local name="$1"; shift
  local pids=() i total=0 start_at
  start_at=$(( $(date +%s%3N) + 700 ))
  for i in 1 2 3 4; do "$@" "$start_at" >"$work/c$i" 2>"$work/c$i.err" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || true; done
  for i in 1 2 3 4; do total=$((total + $(awk '{print $2+0; exit} END{if (NR==0) print 0}' "$work/c$i"))); done
  echo "$name $round $total 0" >>"$results"
}

echo "== etcd_bench: $bench; etcd $(etcd --version | awk 'NR==1{print $3}'); $secs s x $rounds rounds; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$rounds"); do
  pair="$("$bench" etcd-paired "$port" "$secs")"
  record etcd_floor "$(grep '^etcd-floor ' <<<"$pair")"
  record fencekit_etcd "$(grep '^cycle ' <<<"$pair")"
  contend contend4_etcd "$bench" contend "$uri" "$secs" --lock contend-bench --start-at-ms
  echo "round $round done: $(awk -v r="$round" '$2==r {printf "%s=%s ", $1, $3}' "$results")" >&2
done

med() { awk -v n="$1" -v c="${2:-3}" '$1==n{print $c}' "$results" | median; }
ratio="$(awk '$1=="fencekit_etcd"{x[$2]=$3} $1=="etcd_floor"{y[$2]=$3}
  END{for (r in x) if (y[r] > 0) print x[r]/y[r]}' "$results" | median)"
echo
printf "%-24s %10s %8s\n" "medians of $rounds rounds" "cycles/s" "p50 us"
for name in etcd_floor fencekit_etcd contend4_etcd; do
  p50="$(med "$name" 4)"
  [[ "$name" != contend* ]] || p50="-"  # a total over 4 processes has no one latency
  printf "%-24s %10.0f %8s\n" "$name" "$(med "$name")" "$p50"
done
awk -v r="$ratio" 'BEGIN{printf "fencekit etcd / raw gateway cycle: %.2f (same-round median) target >= 0.90: %s\n",
  r, (r >= 0.9 ? "met" : "MISSED")}'
