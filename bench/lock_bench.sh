#!/usr/bin/env bash
# Lock client cycles/s, per backend, beside the floor (two bare EVALSHA round trips) and
# node-redlock, all against the same redis-server in the same run, ROUNDS times interleaved;
# medians printed. Usage: bench/lock_bench.sh [seconds per run, default 4] [rounds, default 3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bench="${LOCK_BENCH:-$root/build/release/bench/lock_bench}"
secs="${1:-4}"
rounds="${2:-3}"
work="$(mktemp -d)"
redis_pid=""
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$((20000 + RANDOM % 40000))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null &
redis_pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done

if [ ! -d "$root/bench/node/node_modules/redlock" ]; then
  (cd "$root/bench/node" && npm install --silent --no-audit --no-fund >/dev/null)
fi

contend() {  # contend URI: 4 processes on one lock; prints the total acquisitions/s
  local uri="$1" pids=() total=0
  for i in 1 2 3 4; do "$bench" contend "$uri" "$secs" >"$work/c$i" & pids+=($!); done
  wait "${pids[@]}"
  for i in 1 2 3 4; do total=$((total + $(awk '{print $2}' "$work/c$i"))); done
  echo "$total"
}

results="$work/results"
for r in $(seq "$rounds"); do
  rm -f "$work/locks.db"*
  echo "floor $("$bench" floor "$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "fencekit_redis $("$bench" cycle "redis://127.0.0.1:$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "node_redlock $(node "$root/bench/node/redlock_bench.js" "$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "fencekit_sqlite $("$bench" cycle "sqlite://$work/locks.db" "$secs" | awk '{print $2}')" >>"$results"
  echo "contend4_redis $(contend "redis://127.0.0.1:$port")" >>"$results"
  echo "contend4_sqlite $(contend "sqlite://$work/locks.db")" >>"$results"
  echo "round $r done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
for name in floor fencekit_redis node_redlock fencekit_sqlite contend4_redis contend4_sqlite; do
  v="$(awk -v n="$name" '$1==n{print $2}' "$results" | median)"
  printf "%-16s %10.0f cycles/s\n" "$name" "$v"
  eval "v_$name=$v"
done
awk -v f="$v_fencekit_redis" -v b="$v_floor" -v n="$v_node_redlock" 'BEGIN{
  printf "fencekit redis / floor:        %.2f (target >= 0.9)\n", f/b
  printf "fencekit redis / node-redlock: %.2f (target >= 1.2)\n", f/n }'
