#!/usr/bin/env bash
# Lock client acquire + release cycles/s, per backend, beside the floor (two bare EVALSHA round
# trips, hiredis) and node-redlock, all against the same loopback redis-server(s) in the same run,
# ROUNDS rounds interleaved; medians printed, with ratios. The floor and fencekit's Redis cycle
# take turns in blocks of 20 cycles inside one process (lock_bench redis-paired), so that both
# see the same machine at the same moments. Figures and what they mean: docs/benchmarks.md.
#
# Usage: bench/lock_bench.sh [seconds per run, default 4] [rounds, default 3]
# Environment:
#   LOCK_BENCH          the lock_bench binary (default: the most recently built of
#                       build/{bench,lockbench}/bench/lock_bench, build/release/bench/lock_bench)
#   LOCK_BENCH_REDLOCK  1 (default): also Redlock on 3 and 5 nodes, fencekit and node-redlock;
#                       0: only the single-node and SQLite figures (one redis-server)
# Needs redis-server, node and npm; installs bench/node's packages with npm when missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-4}"
rounds="${2:-3}"
with_redlock="${LOCK_BENCH_REDLOCK:-1}"

source "$root/bench/lib.sh"
bench="$(find_lock_bench "$root")"
for tool in redis-server redis-cli node npm; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install redis-server nodejs npm)" >&2; exit 1; }
done

work="$(mktemp -d)"  # also holds the SQLite database: keep TMPDIR on a real disk, not tmpfs
redis_pids=()
cleanup() {
  stop_pids "${redis_pids[@]}"
  rm -rf "$work"
}
on_exit cleanup

nodes=()
start_redis() {  # starts a loopback redis-server on a free port and appends the port to nodes
  local p ok=0
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || break
  done
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning \
    >"$work/redis-$p.log" 2>&1 &
  redis_pids+=($!)
  for _ in $(seq 100); do
    if redis-cli -p "$p" ping >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.05
  done
  [ "$ok" -eq 1 ] || { echo "redis-server on port $p did not start:" >&2; cat "$work/redis-$p.log" >&2; exit 1; }
  nodes+=("$p")
}
start_redis
if [ "$with_redlock" = 1 ]; then for _ in 2 3 4 5; do start_redis; done; fi
port="${nodes[0]}"

if [ ! -d "$root/bench/node/node_modules/redlock" ] || [ ! -d "$root/bench/node/node_modules/ioredis" ]; then
  echo "== npm install in bench/node" >&2
  (cd "$root/bench/node" && npm install --silent --no-audit --no-fund >/dev/null)
fi
node_bench="$root/bench/node/redlock_bench.js"

results="$work/results"  # lines: NAME ROUND PER_SECOND P50_US
record() {  # record NAME OUTPUT_LINE
  local line="$2"
  [ -n "$line" ] || line="x 0"
  awk -v n="$1" -v r="$round" '{p50=0; for (i=3;i<=NF;++i) if ($i ~ /^p50_us=/) {p50=substr($i,8)}
    print n, r, $2+0, p50; exit}' <<<"$line" >>"$results"
}

# contend NAME CMD...: 4 processes of CMD (with a common start time appended) on one lock; records
# the total acquisitions/s, and the least and most any one process got.
contend() {
  local name="$1"; shift
  local pids=() i total=0 min=-1 max=0 v start_at
  start_at=$(( $(date +%s%3N) + 700 ))  # all four connected before the window opens
  for i in 1 2 3 4; do
    "$@" "$start_at" >"$work/c$i" 2>"$work/c$i.err" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done  # a contender that failed counts as 0
  for i in 1 2 3 4; do
    v="$(awk '{print $2+0; exit} END{if (NR==0) print 0}' "$work/c$i")"
    total=$((total + v))
    [ "$min" -lt 0 ] || [ "$v" -lt "$min" ] && min="$v"
    [ "$v" -gt "$max" ] && max="$v"
  done
  echo "$name $round $total 0" >>"$results"
  echo "${name}_min $round $min 0" >>"$results"
  echo "${name}_max $round $max 0" >>"$results"
}

uri_redis="redis://127.0.0.1:$port"
echo "== lock_bench: $bench; $secs s x $rounds rounds; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$rounds"); do
  rm -f "$work/locks.db"*
  # The floor and fencekit take turns inside one process (lock_bench redis-paired); node-redlock
  # runs before that pair in odd rounds and after it in even ones.
  if [ $((round % 2)) -eq 1 ]; then record node_redlock "$(node "$node_bench" cycle "$port" "$secs")"; fi
  pair="$("$bench" redis-paired "$port" "$((secs * 2))")"
  record floor "$(grep '^floor ' <<<"$pair")"
  record fencekit_redis "$(grep '^cycle ' <<<"$pair")"
  if [ $((round % 2)) -eq 0 ]; then record node_redlock "$(node "$node_bench" cycle "$port" "$secs")"; fi
  record fencekit_sqlite "$("$bench" cycle "sqlite://$work/locks.db" "$secs")"
  contend contend4_redis "$bench" contend "$uri_redis" "$secs" --start-at-ms
  contend contend4_sqlite "$bench" contend "sqlite://$work/locks.db" "$secs" --start-at-ms
  if [ "$with_redlock" = 1 ]; then
    three="127.0.0.1:${nodes[0]},127.0.0.1:${nodes[1]},127.0.0.1:${nodes[2]}"
    five="$three,127.0.0.1:${nodes[3]},127.0.0.1:${nodes[4]}"
    ports5="$(IFS=,; echo "${nodes[*]}")"
    record redlock3 "$("$bench" cycle "redlock://$three" "$secs")"
    record redlock5 "$("$bench" cycle "redlock://$five" "$secs")"
    record node_redlock5 "$(node "$node_bench" cycle "$ports5" "$secs")"
    contend contend4_redlock5 "$bench" contend "redlock://$five" "$secs" --start-at-ms
    contend contend4_node_redlock5_own node "$node_bench" own "$ports5" "$secs"
    contend contend4_node_redlock5_caller node "$node_bench" caller "$ports5" "$secs"
  fi
  echo "round $round done: $(awk -v r="$round" '$2==r && $1 !~ /_m(in|ax)$/ {printf "%s=%s ", $1, $3}' "$results")" >&2
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

med() { awk -v n="$1" -v c="${2:-3}" '$1==n{print $c}' "$results" | median; }
# Median over rounds of the ratio A/B measured in the same round.
med_ratio() {
  awk -v a="$1" -v b="$2" '$1==a{x[$2]=$3} $1==b{y[$2]=$3}
    END{for (r in x) if (y[r] > 0) print x[r]/y[r]}' "$results" | median
}

echo
printf "%-30s %12s %8s %9s %9s\n" "medians of $rounds rounds" "cycles/s" "p50 us" "vs floor" "vs node"
names=(floor fencekit_redis node_redlock fencekit_sqlite contend4_redis contend4_redis_min
  contend4_redis_max contend4_sqlite contend4_sqlite_min contend4_sqlite_max)
if [ "$with_redlock" = 1 ]; then
  names+=(redlock3 redlock5 node_redlock5 contend4_redlock5 contend4_node_redlock5_own
    contend4_node_redlock5_caller)
fi
f="$(med floor)" n="$(med node_redlock)"
for name in "${names[@]}"; do
  v="$(med "$name")" p="$(med "$name" 4)"
  awk -v name="$name" -v v="$v" -v p="$p" -v f="$f" -v n="$n" 'BEGIN{
    printf "%-30s %12.0f %8s %9.2f %9.2f\n", name, v, (p > 0 ? sprintf("%.0f", p) : "-"),
      (f > 0 ? v / f : 0), (n > 0 ? v / n : 0) }'
done
echo "(contend4_*: total of 4 processes; _min/_max: the least/most one process got)"
echo
r_floor="$(med_ratio fencekit_redis floor)" r_node="$(med_ratio fencekit_redis node_redlock)"
r_ceiling="$(med_ratio floor node_redlock)"
awk -v a="$r_floor" -v b="$r_node" -v c="$r_ceiling" -v f="$(med fencekit_redis)" -v fl="$f" -v n="$n" 'BEGIN{
  printf "fencekit redis 1 client / floor:        %.2f (same-round median; of medians %.2f) target >= 0.90: %s\n",
    a, (fl > 0 ? f / fl : 0), (a >= 0.9 ? "met" : "MISSED")
  printf "fencekit redis 1 client / node-redlock: %.2f (same-round median; of medians %.2f) target >= 1.20: %s\n",
    b, (n > 0 ? f / n : 0), (b >= 1.2 ? "met" : "MISSED")
  # Both make two round trips per cycle, so no client can beat node-redlock by more than this.
  printf "floor / node-redlock (the ceiling of the line above): %.2f\n", c }'
if [ "$with_redlock" = 1 ]; then
  awk -v r="$(med redlock5)" -v n="$(med node_redlock5)" -v c="$(med contend4_redlock5)" \
      -v o="$(med contend4_node_redlock5_own)" -v k="$(med contend4_node_redlock5_caller)" 'BEGIN{
    printf "redlock 5 nodes / node-redlock 5 nodes, 1 client: %.2f (target >= 0.8)\n", (n > 0 ? r / n : 0)
    printf "4 contenders on 5 nodes / node-redlock own retries: %.1f (target >= 20)\n", c / (o > 0 ? o : 1)
    printf "4 contenders on 5 nodes / node-redlock caller retries: %.2f (target >= 1.0)\n", (k > 0 ? c / k : 0) }'
fi
