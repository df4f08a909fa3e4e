#!/usr/bin/env bash
# Lock client cycles/s, per backend, beside the floor (two bare EVALSHA round trips) and
# node-redlock, all against the same redis-server(s) in the same run, ROUNDS times interleaved;
# medians printed. Redlock runs on 3 and 5 nodes, and with 4 contenders on 5 nodes.
# Usage: bench/lock_bench.sh [seconds per run, default 4] [rounds, default 3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bench="${LOCK_BENCH:-$root/build/bench/bench/lock_bench}"
secs="${1:-4}"
rounds="${2:-3}"
work="$(mktemp -d)"
redis_pids=()
cleanup() {
  for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

nodes=()
start_redis() {  # starts a redis-server on a free port and appends the port to nodes
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || break
  done
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning \
    >/dev/null 2>&1 &
  redis_pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  nodes+=("$p")
}
for _ in 1 2 3 4 5; do start_redis; done
port="${nodes[0]}"
three="127.0.0.1:${nodes[0]},127.0.0.1:${nodes[1]},127.0.0.1:${nodes[2]}"
five="$three,127.0.0.1:${nodes[3]},127.0.0.1:${nodes[4]}"
ports5="$(IFS=,; echo "${nodes[*]}")"

if [ ! -d "$root/bench/node/node_modules/redlock" ]; then
  (cd "$root/bench/node" && npm install --silent --no-audit --no-fund >/dev/null)
fi

contend() {  # contend CMD...: 4 processes of CMD on one lock; prints the total acquisitions/s
  local pids=() total=0
  for i in 1 2 3 4; do "$@" >"$work/c$i" & pids+=($!); done
  wait "${pids[@]}" || true  # a contender that failed counts as 0
  for i in 1 2 3 4; do total=$((total + $(awk '{print $2+0} END{if (NR==0) print 0}' "$work/c$i"))); done
  echo "$total"
}

results="$work/results"
for r in $(seq "$rounds"); do
  rm -f "$work/locks.db"*
  echo "floor $("$bench" floor "$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "fencekit_redis $("$bench" cycle "redis://127.0.0.1:$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "node_redlock $(node "$root/bench/node/redlock_bench.js" cycle "$port" "$secs" | awk '{print $2}')" >>"$results"
  echo "fencekit_sqlite $("$bench" cycle "sqlite://$work/locks.db" "$secs" | awk '{print $2}')" >>"$results"
  echo "contend4_redis $(contend "$bench" contend "redis://127.0.0.1:$port" "$secs")" >>"$results"
  echo "contend4_sqlite $(contend "$bench" contend "sqlite://$work/locks.db" "$secs")" >>"$results"
  echo "redlock3 $("$bench" cycle "redlock://$three" "$secs" | awk '{print $2}')" >>"$results"
  echo "redlock5 $("$bench" cycle "redlock://$five" "$secs" | awk '{print $2}')" >>"$results"
  echo "node_redlock5 $(node "$root/bench/node/redlock_bench.js" cycle "$ports5" "$secs" | awk '{print $2}')" >>"$results"
  echo "contend4_redlock5 $(contend "$bench" contend "redlock://$five" "$secs")" >>"$results"
  echo "contend4_node_redlock5_own $(contend node "$root/bench/node/redlock_bench.js" own "$ports5" "$secs")" >>"$results"
  echo "contend4_node_redlock5_caller $(contend node "$root/bench/node/redlock_bench.js" caller "$ports5" "$secs")" >>"$results"
  echo "round $r done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
for name in floor fencekit_redis node_redlock fencekit_sqlite contend4_redis contend4_sqlite \
    redlock3 redlock5 node_redlock5 contend4_redlock5 contend4_node_redlock5_own \
    contend4_node_redlock5_caller; do
  v="$(awk -v n="$name" '$1==n{print $2}' "$results" | median)"
  printf "%-16s %10.0f cycles/s\n" "$name" "$v"
  eval "v_$name=$v"
done
awk -v f="$v_fencekit_redis" -v b="$v_floor" -v n="$v_node_redlock" 'BEGIN{
  printf "fencekit redis / floor:        %.2f (target >= 0.9)\n", f/b
  printf "fencekit redis / node-redlock: %.2f (target >= 1.2)\n", f/n }'
awk -v r="$v_redlock5" -v n="$v_node_redlock5" -v c="$v_contend4_redlock5" \
    -v o="$v_contend4_node_redlock5_own" -v k="$v_contend4_node_redlock5_caller" 'BEGIN{
  printf "redlock 5 nodes / node-redlock 5 nodes, 1 client: %.2f (target >= 0.8)\n", r/n
  printf "4 contenders on 5 nodes / node-redlock own retries: %.1f (target >= 20)\n", c/(o>0?o:1)
  printf "4 contenders on 5 nodes / node-redlock caller retries: %.2f (target >= 1.0)\n", c/k }'
