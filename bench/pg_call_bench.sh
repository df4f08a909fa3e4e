#!/usr/bin/env bash
# How the cost of one call of fencekit.write_many (what fenced runs for a batch of unconditional
# writes on PostgreSQL) grows with the writes in it: pgbench -M prepared -c1 calls it directly
# with 16, 64 and 256 puts of 100-byte values (two locks at their fences' tokens, keys already
# stored: a holder replacing values, the common batch), on a PostgreSQL this script starts
# itself with synchronous_commit off, so that the figure is the call's CPU, not the disk's
# flush. Printed: calls/s and microseconds per write at each size, medians of ROUNDS rounds
# with the sizes' order rotated, and each size's cost per write against 16's and against the
# size before's. Target: the cost per write never grows with the size (each <= 1.0x the size
# before's): fenced makes batches of up to --max-batch 256 writes under load, and a larger batch
# may not cost more per write.
# Everything started here is stopped on exit, also on failure or Ctrl-C. Builds nothing: the
# schema is made by the fenced binary in $FENCED, which is then stopped.
#
# Usage: bench/pg_call_bench.sh [seconds per run, default 5] [rounds, default 3]
#   FENCED=path/to/fenced   (default build/bench/tools/fenced)
#   PG_BIN=dir              PostgreSQL's initdb, postgres, pgbench, psql (default the newest
#                           /usr/lib/postgresql/*/bin)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, start_postgres, stop_postgres, on_exit
fenced="${FENCED:-$root/build/bench/tools/fenced}"
secs="${1:-5}"
rounds="${2:-3}"
sizes=(16 64 256)
pg_bin="${PG_BIN:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1)}"
for b in initdb postgres pg_ctl pgbench psql; do
  [ -x "$pg_bin/$b" ] || { echo "pg_call_bench: no $b in '$pg_bin'; install postgresql-15 or set PG_BIN" >&2; exit 1; }
done
[ -x "$fenced" ] || { echo "pg_call_bench: no fenced binary at $fenced; build it or set FENCED" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-pg-call-bench.XXXXXX")"
pgdata="$work/pg/data"
pg_pid=""
fenced_pid=""
cleanup() {
  [ -z "$fenced_pid" ] || { kill "$fenced_pid" 2>/dev/null || true; wait "$fenced_pid" 2>/dev/null || true; }
  stop_postgres
  rm -rf "$work"
}
on_exit cleanup

start_postgres pg_call_bench -c synchronous_commit=off
sql() { "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 -Atq "$@"; }
sql -d postgres -c 'CREATE DATABASE fencekit'
# As fenced's own sessions: one plan per statement of the function, made once.
sql -d postgres -c 'ALTER DATABASE fencekit SET plan_cache_mode = force_generic_plan'
pg_url="postgresql://postgres@127.0.0.1:$pg_port/fencekit"
"$fenced" --listen 127.0.0.1:0 --db "$pg_url" --durability full >"$work/fenced.log" 2>&1 &
fenced_pid=$!
[ -n "$(fenced_url "$work/fenced.log" "$fenced_pid")" ] || { echo "pg_call_bench: fenced did not start:" >&2; cat "$work/fenced.log" >&2; exit 1; }
kill "$fenced_pid"
wait "$fenced_pid" 2>/dev/null || true
fenced_pid=""

# call_sql N: one call of fencekit.write_many with N puts, in (lock, key) order: locks A and B,
# half each, token 1 (the fence each lock's first call makes).
call_sql() {
  local n="$1" i lock locks="" keys=""
  for ((i = 0; i < n; i++)); do
    lock=A
    [ "$i" -lt $((n / 2)) ] || lock=B
    locks+="${locks:+, }'$lock'"
    keys+="${keys:+, }'k-$lock-$(printf %04d "$i")'"
  done
  printf "SELECT count(*) FROM fencekit.write_many(array_fill(false, ARRAY[%d]), ARRAY[%s]::bytea[], array_fill(1::int8, ARRAY[%d]), ARRAY[%s]::bytea[], array_fill(convert_to(repeat('v', 100), 'UTF8'), ARRAY[%d]), array_fill(NULL::text, ARRAY[%d]), array_fill(NULL::bytea, ARRAY[%d]), array_fill(0::int8, ARRAY[%d]), array_fill(NULL::text, ARRAY[%d]), array_fill(NULL::bytea, ARRAY[%d]), array_fill(false, ARRAY[%d]), false, false, 0, true);\n" \
    "$n" "$locks" "$n" "$keys" "$n" "$n" "$n" "$n" "$n" "$n" "$n"
}
for n in "${sizes[@]}"; do
  call_sql "$n" >"$work/call-$n.sql"
  # Every write accepted (the first call makes the fences and the keys), or the figures mean
  # nothing.
  accepted="$(sql -d fencekit -c "$(sed "s/SELECT count(\*)/SELECT count(*) FILTER (WHERE o_outcome = 'accepted')/" "$work/call-$n.sql")")"
  [ "$accepted" = "$n" ] || { echo "pg_call_bench: $accepted of a call's $n writes were accepted" >&2; exit 1; }
done

declare -A tps
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#sizes[@]}; k++)); do
    n="${sizes[$(((k + r) % ${#sizes[@]}))]}"
    out="$("$pg_bin/pgbench" -h 127.0.0.1 -p "$pg_port" -U postgres -n -M prepared -c 1 -j 1 \
      -T "$secs" -f "$work/call-$n.sql" fencekit 2>&1)" || { echo "pg_call_bench: pgbench failed: $out" >&2; exit 1; }
    t="$(grep -o 'tps = [0-9.]*' <<<"$out" | head -n1 | cut -d' ' -f3)"
    [ -n "$t" ] || { echo "pg_call_bench: no tps in pgbench's output: $out" >&2; exit 1; }
    tps[$n]+="$t "
  done
done

echo
echo "fencekit.write_many called directly: medians of $rounds rounds of ${secs}s ($(nproc) CPUs, $("$pg_bin/postgres" --version | sed 's/^postgres (PostgreSQL)/PostgreSQL/'), synchronous_commit off)"
printf '%-8s %10s %12s %10s %14s\n' writes calls/s "us/write" "vs 16" "vs the one before"
base=""
prev=""
verdict=met
for n in "${sizes[@]}"; do
  # shellcheck disable=SC2086  # a list of figures, one per line for median
  m="$(printf '%s\n' ${tps[$n]} | median)"
  us="$(awk -v t="$m" -v n="$n" 'BEGIN { printf "%.1f", 1e6 / t / n }')"
  [ -n "$base" ] || base="$us"
  step="-"
  if [ -n "$prev" ]; then
    step="$(awk -v a="$us" -v b="$prev" 'BEGIN { printf "%.2fx", a / b }')"
    awk -v a="$us" -v b="$prev" 'BEGIN { exit !(a > b) }' && verdict=MISSED
  fi
  printf '%-8s %10.0f %12s %9.2fx %14s\n' "$n" "$m" "$us" "$(awk -v a="$us" -v b="$base" 'BEGIN { print a / b }')" "$step"
  prev="$us"
done
echo "cost per write against the size before: target <= 1.0x at every size: $verdict"
