#!/usr/bin/env bash
# How fenced's cost grows, on SQLite (a file) and on PostgreSQL (a server this script starts
# itself, afresh for each benchmark: fsync on, synchronous_commit on), all in one run. Each point is printed against the
# same benchmark's smallest point of this run, as a ratio, and against its target (met/MISSED;
# FAILED, and a non-zero exit at the end, for a point that could not be measured or whose
# requests failed). Every run is wrk -t2 -c64 --latency, measured over a window of SECONDS after
# the first WARMUP s (SCALE_WARMUP, default 1): the writes fenced accepted in the window (its
# /metrics), so that neither the start nor the requests in flight at the end, which are many
# with large values, count; p99 is wrk's, over the whole run. With ROUNDS > 1 each point is run
# that many times, medians kept. Beside each rate, the bytes written per write in the window:
# by fenced on SQLite (/proc/PID/io wchar: WAL, checkpoints, HTTP answers), the WAL on
# PostgreSQL.
#   keys: writes/s and p99 of bench/scale_keys.lua (90% PUT, 10% GET of keys chosen uniformly at
#      random among those stored; 100-byte values; writes/s counts the PUTs) with 10^3, 10^5,
#      10^6 and 10^7 keys stored; the RSS of fenced after each run (VmRSS; a fenced started for
#      each point); the store's size per key (after a checkpoint: SQLite's
#      file and its -wal; PostgreSQL's pg_total_relation_size of the tables of schema fencekit,
#      their indexes and TOAST included) against the raw bytes (key + value). The keys are not
#      written through HTTP (10^7 would take an hour): fenced is stopped and the rows it would
#      have written are loaded with SQL (objects, version counter, the last --history decisions),
#      growing the same store from one point to the next; each load is checked (a loaded row as
#      fenced's own, a GET of the last key, a PUT replacing it at the next version, a 404 past it).
#      Targets: writes/s at 10^7 >= 0.7x at 10^3; RSS within 20% of 10^3's; size <= 2x raw.
#   values: MB/s (10^6 bytes) and writes/s of PUTs of 100 B, 10 KiB, 100 KiB and 1 MiB values
#      (bench/scale_values.lua), and of batches of 8 such values (POST /v1/batch,
#      bench/scale_batch.lua, on a fenced with a --max-body that fits them, printed). Target:
#      1 MiB PUT MB/s >= 0.5x the disk's sequential write rate, dd bs=1M count=256 oflag=direct
#      on the file system of the database, measured just before (and, for scale, the same dd
#      with conv=fdatasync: one sync at the end, which a virtual disk's host cache cannot skip).
#   locks: writes/s of PUTs each under its key's own lock (bench/scale_locks.lua: 100,000 keys,
#      token 1 for every lock) with 10 and with 100,000 locks, a store of each. Target: 100,000
#      locks >= 0.8x 10 locks.
#   history: writes/s of bench/put.lua on fenced --history 10000 and --history 1000000, each
#      store's history full (loaded with SQL) before the run: what trimming a larger history
#      costs. Reported, no target.
# Loopback only; everything started here is stopped on exit, also on failure or Ctrl-C, and the
# temporary folder (stores, PostgreSQL's cluster) removed. Builds nothing: give the fenced binary
# in $FENCED. Takes about 5 minutes on 2 CPUs with one round (loading 10^7 rows takes under a
# minute in all), each more round about 4 more; on a shared machine single runs differ by 20-30%
# from one to the next: compare ratios of several rounds before reading much into one.
#
# Usage: bench/scale_bench.sh [seconds per run, default $SCALE_SECONDS or 5]
#                             [rounds, default $SCALE_ROUNDS or 1]
#   FENCED=path/to/fenced     (default build/bench/tools/fenced)
#   FENCED_ARGS="..."         extra options for every fenced
#   PG_BIN=dir                PostgreSQL's initdb, postgres, pg_ctl, psql (default the newest
#                             /usr/lib/postgresql/*/bin)
#   SCALE_DBS="sqlite pg"     the databases
#   SCALE_BENCHES="keys values locks history"   the benchmarks
#   SCALE_KEY_POINTS="1000 100000 1000000 10000000"   keys stored at each point (ascending, even)
#   SCALE_WARMUP=1            unmeasured seconds of load before each point's runs (0: none)
#   SCALE_SVG=path            where to write the plot (default: a temporary file, printed)
#   SCALE_PERF=1              perf record -a -g during the largest keys point's first run, its
#                             top entries printed (needs linux-perf; slows that point down)
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) fails the command that uses it
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, wrk_figures, stop_pids, on_exit
fenced="${FENCED:-$root/build/bench/tools/fenced}"
secs="${1:-${SCALE_SECONDS:-5}}"
rounds="${2:-${SCALE_ROUNDS:-1}}"
warmup="${SCALE_WARMUP:-1}"
read -r -a dbs <<<"${SCALE_DBS:-sqlite pg}"
read -r -a benches <<<"${SCALE_BENCHES:-keys values locks history}"
read -r -a key_points <<<"${SCALE_KEY_POINTS:-1000 100000 1000000 10000000}"
value_sizes=(100 10240 102400 1048576)
lock_points=(10 100000)
lock_keys=100000
history_points=(10000 1000000)
value_batch=8
pg_bin="${PG_BIN:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1)}"

for db in "${dbs[@]}"; do
  case "$db" in sqlite | pg) ;; *) echo "scale_bench: unknown database '$db' in SCALE_DBS; use sqlite, pg" >&2; exit 2 ;; esac
done
for bench in "${benches[@]}"; do
  case "$bench" in keys | values | locks | history) ;;
    *) echo "scale_bench: unknown benchmark '$bench' in SCALE_BENCHES; use keys, values, locks, history" >&2; exit 2 ;;
  esac
done
[ "${#dbs[@]}" -gt 0 ] && [ "${#benches[@]}" -gt 0 ] || { echo "scale_bench: nothing to run" >&2; exit 2; }
prev=0
for n in "${key_points[@]}"; do
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ $((n % 2)) -ne 0 ] || [ "$n" -le "$prev" ] || [ "$n" -lt 4 ]; then
    echo "scale_bench: SCALE_KEY_POINTS must be even numbers >= 4, ascending" >&2
    exit 2
  fi
  prev="$n"
done
[[ "$secs" =~ ^[1-9][0-9]*$ ]] && [[ "$rounds" =~ ^[1-9][0-9]*$ ]] && [[ "$warmup" =~ ^[0-9]+$ ]] ||
  { echo "scale_bench: seconds and rounds must be whole numbers >= 1, SCALE_WARMUP >= 0" >&2; exit 2; }
for tool in wrk curl sqlite3 dd; do
  command -v "$tool" >/dev/null || { echo "scale_bench: $tool is not installed (./scripts/bench scale installs it)" >&2; exit 1; }
done
[ -x "$fenced" ] || { echo "scale_bench: no fenced binary at $fenced; build it or set FENCED" >&2; exit 1; }
wants_pg=0
[[ " ${dbs[*]} " != *" pg "* ]] || wants_pg=1
if [ "$wants_pg" -eq 1 ]; then
  for b in initdb postgres pg_ctl psql; do
    [ -x "$pg_bin/$b" ] || { echo "scale_bench: no $b in '$pg_bin'; install postgresql-15 or set PG_BIN" >&2; exit 1; }
  done
fi
if [ "${SCALE_PERF:-0}" = 1 ]; then
  command -v perf >/dev/null || { echo "scale_bench: SCALE_PERF=1 needs perf (linux-perf)" >&2; exit 1; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-scale-bench.XXXXXX")"
svg="${SCALE_SVG:-}"
svg_is_temp=0
if [ -z "$svg" ]; then
  svg="$(mktemp "${TMPDIR:-/tmp}/fencekit-scale.XXXXXX.svg")"
  svg_is_temp=1
fi
pgdata="$work/pg/data"
pids=()
pg_pid=""
: >"$work/results"
# forget_pid PID: drops PID from pids (once it has been waited for).
forget_pid() {
  local kept=() p
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  pids=("${kept[@]}")
}
cleanup() {
  stop_pids "${pids[@]}"
  stop_postgres
  rm -rf "$work"
}
on_exit cleanup

# --- PostgreSQL: a fresh cluster in $work for each benchmark (what one benchmark leaves, a
# 2 GB database dropped, gigabytes of WAL, must not slow the next down: batches on PostgreSQL ran
# 3-4x slower after the keys benchmark on the same server), owned by the postgres user when
# root. Started and stopped in each benchmark's subshell (run_section).
pg_port=""
# pg_sql DBNAME [psql args...]: psql on database DBNAME, stopping at the first error; SQL from the
# arguments (-c) or stdin. Bounded: a load of 10^7 rows takes a minute or two.
pg_sql() {
  local name="$1"
  shift
  timeout 900 "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -d "$name" -v ON_ERROR_STOP=1 -Atq "$@"
}

# --- One store per benchmark and database: a SQLite file in $work, or a database of the server.
# new_store DB NAME: prints the --db of a new, empty store.
new_store() {
  if [ "$1" = sqlite ]; then
    echo "$work/$2.db"
  else
    pg_sql postgres -c "CREATE DATABASE $2" >&2
    echo "postgresql://postgres@127.0.0.1:$pg_port/$2"
  fi
}
# drop_store DB STORE: removes the store (its disk space), once measured.
drop_store() {
  if [ "$1" = sqlite ]; then
    rm -f "$2" "$2-wal" "$2-shm"
  else
    pg_sql postgres -c "DROP DATABASE IF EXISTS ${2##*/}" >&2
  fi
}
# query DB STORE SQL: runs SQL on the store (fenced stopped or not), printing its rows.
query() {
  if [ "$1" = sqlite ]; then
    timeout 900 sqlite3 -bail -batch "$2" "$3"
  else
    pg_sql "${2##*/}" -c "$3"
  fi
}

# SQL that differs between the two: the store's tables, names as bytes, zero-padded numbers.
tab() { if [ "$1" = sqlite ]; then echo "$2"; else echo "fencekit.$2"; fi; }
blob() { if [ "$1" = sqlite ]; then echo "CAST($2 AS BLOB)"; else echo "convert_to($2, 'UTF8')"; fi; }
pad() { if [ "$1" = sqlite ]; then echo "printf('%0$3d', $2)"; else echo "lpad(($2)::text, $3, '0')"; fi; }
series() {
  if [ "$1" = sqlite ]; then echo "generate_series($2, $3)"; else echo "generate_series($2::int8, $3::int8) AS s(value)"; fi
}
# typeofs DB COLUMN...: ", typeof(COLUMN)..." on SQLite, whose columns take any type; nothing on
# PostgreSQL, whose columns have one.
typeofs() {
  local db="$1" c
  shift
  [ "$db" = sqlite ] || return 0
  for c in "$@"; do printf ', typeof(%s)' "$c"; done
}
null_() { if [ "$1" = sqlite ]; then echo NULL; else echo "NULL::$2"; fi; }
true_() { if [ "$1" = sqlite ]; then echo 1; else echo true; fi; }
false_() { if [ "$1" = sqlite ]; then echo 0; else echo false; fi; }
v100_sqlite="x'$(printf '76%.0s' $(seq 100))'"   # 100 bytes of "v", as bench/put.lua writes
v100_pg="'\\x$(printf '76%.0s' $(seq 100))'::bytea"
v100() { if [ "$1" = sqlite ]; then echo "$v100_sqlite"; else echo "$v100_pg"; fi; }
now_ms() { date +%s%3N; }

# counter DB STORE: the highest version the store has given (the next put gets one more).
counter() {
  if [ "$1" = sqlite ]; then
    query sqlite "$2" "SELECT value FROM counters WHERE name = 'version'"
  else
    query pg "$2" "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM fencekit.versions"
  fi
}

# load DB STORE HISTORY SQL: runs SQL (INSERTs made by the functions below) on the stopped
# store in one transaction, made fast where that changes nothing of what is stored: SQLite
# without journal nor sync for the load (the store goes back to WAL, as fenced keeps it, and is
# synced after); PostgreSQL without waiting for the commit's flush, then vacuumed (hint bits,
# visibility map, statistics: what autovacuum would otherwise do during the next run) and
# checkpointed, so that no run pays for the load's writes.
load() {
  local db="$1" store="$2" sql="$3" mode
  if [ "$db" = sqlite ]; then
    mode="$(timeout 900 sqlite3 -bail -batch "$store" <<SQL
PRAGMA journal_mode=OFF;
PRAGMA synchronous=OFF;
PRAGMA cache_size=-262144;
BEGIN;
$sql
COMMIT;
PRAGMA journal_mode=WAL;
SQL
)"
    [ "$(echo "$mode" | tail -n1)" = wal ] || { echo "scale_bench: $store did not go back to WAL: $mode" >&2; return 1; }
    timeout 300 sync "$store"
  else
    pg_sql "${store##*/}" >/dev/null <<SQL
SET synchronous_commit = off;
BEGIN;
$sql
COMMIT;
VACUUM (ANALYZE) fencekit.objects;
VACUUM (ANALYZE) fencekit.fences;
VACUUM (ANALYZE) fencekit.history;
VACUUM (ANALYZE) fencekit.history_runs;
CHECKPOINT;
SQL
  fi
}
# objects_sql DB FIRST LAST KEY LOCK TOKEN VERSION_BASE: the rows of puts of keys KEY (an SQL
# expression of `value`, FIRST..LAST), each under lock LOCK at token TOKEN, value 100 bytes of
# "v", key `value`'s version VERSION_BASE + value: the objects as fenced writes them.
objects_sql() {
  local db="$1"
  echo "INSERT INTO $(tab "$db" objects)(key, value, lock, token, version)
  SELECT $(blob "$db" "$4"), $(v100 "$db"), $(blob "$db" "$5"), $6, $7 + value
  FROM $(series "$db" "$2" "$3");"
}
# history_sql DB FIRST LAST KEY LOCK TOKEN HISTORY: the decisions fenced records for those puts
# (accepted, at the fence's token), in order, then the history cut to its last HISTORY.
history_sql() {
  local db="$1"
  echo "INSERT INTO $(tab "$db" history)(time_ms, op, lock, token, key, accepted, highest, reason, principal)
  SELECT $(now_ms), 'put', $(blob "$db" "$5"), $6, $(blob "$db" "$4"), $(true_ "$db"), $6, $(null_ "$db" text), $(null_ "$db" bytea)
  FROM $(series "$db" "$2" "$3") ORDER BY value;
DELETE FROM $(tab "$db" history) WHERE seq <= (SELECT max(seq) FROM $(tab "$db" history)) - $7;"
}
# fences_sql DB FIRST LAST LOCK TOKEN: fences made by the locks' first writes (no service).
fences_sql() {
  local db="$1"
  echo "INSERT INTO $(tab "$db" fences)(lock, highest, service, confirmed)
  SELECT $(blob "$db" "$4"), $5, $(null_ "$db" text), $(false_ "$db") FROM $(series "$db" "$2" "$3");"
}
# set_counter_sql DB VERSION: the version counter at VERSION (the next put gets one more).
set_counter_sql() {
  if [ "$1" = sqlite ]; then
    echo "UPDATE counters SET value = $2 WHERE name = 'version';"
  else
    echo "SELECT setval('fencekit.versions', $2);"
  fi
}

# --- fenced, started and stopped by each benchmark.
# start_fenced NAME DB [OPTION...]: fenced on a free port; sets fenced_pid and fenced_url.
start_fenced() {
  local name="$1" db="$2"
  shift 2
  # shellcheck disable=SC2086  # FENCED_ARGS is a list of options
  "$fenced" --listen 127.0.0.1:0 --db "$db" --durability full ${FENCED_ARGS:-} "$@" >"$work/$name.log" 2>&1 &
  fenced_pid=$!
  pids+=("$fenced_pid")
  fenced_url="$(fenced_url "$work/$name.log" "$fenced_pid")"
  [ -n "$fenced_url" ] || { echo "scale_bench: fenced ($name, --db $db) did not start:" >&2; cat "$work/$name.log" >&2; return 1; }
}
stop_fenced() {
  kill -TERM "$fenced_pid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$fenced_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$fenced_pid" 2>/dev/null || true
  wait "$fenced_pid" 2>/dev/null || true
  forget_pid "$fenced_pid"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$fenced_pid/status"; }

# http_put KEY LOCK TOKEN FILE STATUS: a PUT of FILE's bytes that must answer STATUS; prints
# the answer's body.
http_put() {
  local code
  code="$(timeout 60 curl -s -o "$work/put.answer" -w '%{http_code}' -X PUT -H 'Expect:' \
    -H "Fencing-Lock: $2" -H "Fencing-Token: $3" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$4" "$fenced_url/v1/objects/$1")" || true
  if [ "$code" != "$5" ]; then
    echo "scale_bench: PUT $1 (lock $2, token $3) answered ${code:-nothing}, not $5: $(head -c 300 "$work/put.answer" 2>/dev/null)" >&2
    return 1
  fi
  cat "$work/put.answer"
}
printf 'v%.0s' $(seq 100) >"$work/v100"

# check_loaded KEY LOCK TOKEN VERSION [ABSENT_KEY]: what a load left, through fenced: KEY reads
# back as loaded (100 bytes of "v", its lock, token and version); a PUT replacing it is accepted
# as a replacement (200) at the store's next version; ABSENT_KEY, just past the loaded ones, is
# not found.
check_loaded() {
  local key="$1" lock="$2" token="$3" version="$4" absent="${5:-}" code headers answer
  code="$(timeout 30 curl -s -D "$work/get.headers" -o "$work/get.body" -w '%{http_code}' "$fenced_url/v1/objects/$key")" || true
  headers="$(tr -d '\r' <"$work/get.headers" 2>/dev/null || true)"
  if [ "$code" != 200 ] || ! cmp -s "$work/get.body" "$work/v100" ||
     ! grep -qx "Fencing-Lock: $lock" <<<"$headers" || ! grep -qx "Fencing-Token: $token" <<<"$headers" ||
     ! grep -qx "Object-Version: $version" <<<"$headers"; then
    echo "scale_bench: the loaded key $key does not read back as fenced would have written it" \
      "(lock $lock, token $token, version $version): status ${code:-none}" >&2
    echo "$headers" >&2
    return 1
  fi
  answer="$(http_put "$key" "$lock" "$token" "$work/v100" 200)"
  if [[ "$answer" != *"\"version\":$((version + 1))"* ]]; then
    echo "scale_bench: a PUT replacing the loaded key $key did not get version $((version + 1)): $answer" >&2
    return 1
  fi
  if [ -n "$absent" ]; then
    code="$(timeout 30 curl -s -o /dev/null -w '%{http_code}' "$fenced_url/v1/objects/$absent")" || true
    [ "$code" = 404 ] || { echo "scale_bench: key $absent, past the loaded ones, answered ${code:-nothing}, not 404" >&2; return 1; }
  fi
}

# accepted_now: "TIME WRITES": fenced's count of accepted writes (a batch counts as its writes),
# and when it was read (the middle of the request, which waits behind the load).
accepted_now() {
  local t0 t1 n
  t0="$(date +%s.%N)"
  n="$(timeout 30 curl -s "$fenced_url/metrics" | awk '$1 == "fenced_writes_accepted_total" { print $2 }')"
  t1="$(date +%s.%N)"
  [ -n "$n" ] || { echo "scale_bench: fenced's /metrics did not answer" >&2; return 1; }
  awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.6f %d\n", (a + b) / 2, n }'
}
# written_bytes DB: bytes written so far where a write's cost goes to disk: SQLite, what fenced
# has written with write calls (/proc/PID/io wchar: the WAL, the pages checkpointed into the
# database file, and its HTTP answers, a few hundred bytes a request; write_bytes would be the
# bytes sent to storage, but it leaves out pages written again before the kernel wrote them
# back, most of them under load); PostgreSQL, the WAL the server has inserted (its position; the
# pages its checkpoints write come on top).
written_bytes() {
  if [ "$1" = sqlite ]; then
    awk '/^wchar:/ { print $2 }' "/proc/$fenced_pid/io"
  else
    pg_sql postgres -c "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"
  fi
}
# measure DB LABEL SCRIPT [VAR=VALUE...]: $rounds runs of wrk -t2 -c64 against fenced (the
# variables in its environment: the Lua scripts read them), each $warmup + $secs + 1 s long,
# measured over the $secs s window after the first $warmup: writes accepted by fenced in the
# window (so neither the start nor the requests in flight at the end count; a GET is no write).
# Sets m_wps (writes/s) and m_p99 (wrk's p99 over the whole run), medians over the runs; m_bad
# (failed requests, all runs); m_written (bytes written per write in the windows, see
# written_bytes).
measure() {
  local db="$1" label="$2" script="$3" r f out pid t0 a0 w0 t1 a1 w1 wps="" p99="" writes=0 written=0
  shift 3
  m_bad=0
  for r in $(seq "$rounds"); do
    out="$work/$label.$r.txt"
    env "$@" wrk -t2 -c64 -d"$((warmup + secs + 1))s" --timeout 10s --latency -s "$script" "$fenced_url" >"$out" 2>&1 &
    pid=$!
    pids+=("$pid")
    sleep "$warmup"
    read -r t0 a0 < <(accepted_now)
    w0="$(written_bytes "$db")"
    sleep "$secs"
    read -r t1 a1 < <(accepted_now)
    w1="$(written_bytes "$db")"
    if ! wait "$pid"; then
      echo "scale_bench: wrk failed:" >&2
      cat "$out" >&2
      return 1
    fi
    forget_pid "$pid"
    read -r -a f < <(wrk_figures "$out")
    wps+="$(awk -v a="$a0" -v b="$a1" -v s="$t0" -v e="$t1" 'BEGIN { print (b - a) / (e - s) }')"$'\n'
    p99+="${f[1]}"$'\n'
    [ "$rounds" -eq 1 ] || say "($label, run $r: $(tail -n1 <<<"${wps%$'\n'}") writes/s, p99 ${f[1]} ms, ${f[2]} failed)"
    m_bad=$((m_bad + f[2]))
    writes=$((writes + a1 - a0)) written=$((written + w1 - w0))
  done
  m_wps="$(printf '%s' "$wps" | median)"
  m_p99="$(printf '%s' "$p99" | median)"
  m_written="$(awk -v w="$written" -v n="$writes" 'BEGIN { print (n > 0 ? w / n : 0) }')"
}
# rec BENCH DB POINT METRIC VALUE: one figure, for the summary and the plot.
rec() { echo "$*" >>"$work/results"; }
say() { echo "  $*" >&2; }

# store_size DB STORE NAME: records the stopped store's size in bytes: all of it (SQLite: the
# file and its -wal after a checkpoint; PostgreSQL: the tables of schema fencekit with their
# indexes and TOAST), and the objects (with the index of their keys) and the history apart.
store_size() {
  local db="$1" store="$2" bench="$3" point="$4" total objects history
  if [ "$db" = sqlite ]; then
    query sqlite "$store" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
    total=$(($(stat -c %s "$store") + $( [ -f "$store-wal" ] && stat -c %s "$store-wal" || echo 0)))
    read -r objects history < <(query sqlite "$store" "SELECT
      (SELECT sum(pgsize) FROM dbstat WHERE aggregate = TRUE AND name IN ('objects', 'sqlite_autoindex_objects_1')),
      (SELECT sum(pgsize) FROM dbstat WHERE aggregate = TRUE AND name = 'history')" | tr '|' ' ')
  else
    read -r total objects history < <(query pg "$store" "SELECT
      (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'fencekit' AND c.relkind = 'r'),
      pg_total_relation_size('fencekit.objects'),
      pg_total_relation_size('fencekit.history') + pg_total_relation_size('fencekit.history_runs')" | tr '|' ' ')
  fi
  rec "$bench" "$db" "$point" size "$total"
  rec "$bench" "$db" "$point" size_objects "$objects"
  rec "$bench" "$db" "$point" size_history "$history"
}

# --- keys: one store grown from point to point.
# Key i: "k" and i in 8 digits, lock "holder-(i % 2)", token 1; 9 + 100 raw bytes.
keys_bench() {
  local db="$1" store n n0 base t0 t1 same last perf_pid=""
  store="$(new_store "$db" scale_keys)"
  # The first key of each holder through fenced itself: it makes the schema and each holder's
  # fence, and its rows are the model the loaded ones are compared with.
  start_fenced "keys-$db" "$store"
  http_put k00000000 holder-0 1 "$work/v100" 201 >/dev/null
  http_put k00000001 holder-1 1 "$work/v100" 201 >/dev/null
  stop_fenced
  n0=2
  for n in "${key_points[@]}"; do
    base="$(counter "$db" "$store")"
    t0="$(date +%s.%N)"
    load "$db" "$store" "$(objects_sql "$db" "$n0" $((n - 1)) "'k' || $(pad "$db" value 8)" "'holder-' || (value % 2)" 1 $((base - n0 + 1)))
$(history_sql "$db" $((n - 10000 > n0 ? n - 10000 : n0)) $((n - 1)) "'k' || $(pad "$db" value 8)" "'holder-' || (value % 2)" 1 10000)
$(set_counter_sql "$db" $((base + n - n0)))"
    t1="$(date +%s.%N)"
    say "keys, $db: loaded keys $n0..$((n - 1)) in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s"
    if [ "$n0" -eq 2 ]; then
      # A loaded key's rows as fenced's own (k00000000, holder-0's first key), column for column
      # but the key, its version and the time: both keys' objects alike, their decisions alike.
      same="$(query "$db" "$store" "SELECT
          (SELECT count(*) FROM $(tab "$db" objects) WHERE key IN ($(blob "$db" "'k00000000'"), $(blob "$db" "'k$(printf '%08d' $((n - 2)))'"))),
          (SELECT count(*) FROM (SELECT DISTINCT lock, token, length(value)$(typeofs "$db" key value lock token version)
             FROM $(tab "$db" objects) WHERE key IN ($(blob "$db" "'k00000000'"), $(blob "$db" "'k$(printf '%08d' $((n - 2)))'"))) AS o),
          (SELECT count(*) FROM (SELECT DISTINCT op, lock, token, accepted, highest, reason, principal$(typeofs "$db" time_ms op lock key accepted highest reason principal)
             FROM $(tab "$db" history) WHERE key IN ($(blob "$db" "'k00000000'"), $(blob "$db" "'k$(printf '%08d' $((n - 2)))'"))) AS h)")"
      if [ "$same" != "2|1|1" ]; then
        echo "scale_bench: a loaded key's rows differ from those fenced wrote (keys, objects alike, decisions alike: $same)" >&2
        return 1
      fi
    fi
    start_fenced "keys-$db-$n" "$store"
    last=$((n - 1))
    check_loaded "k$(printf '%08d' "$last")" "holder-$((last % 2))" 1 $((base + n - n0)) "k$(printf '%08d' "$n")"
    if [ "${SCALE_PERF:-0}" = 1 ] && [ "$n" = "${key_points[-1]}" ]; then
      timeout $((secs + warmup + 30)) perf record -a -g -o "$work/perf.$db.data" -- sleep $((secs + warmup)) \
        >/dev/null 2>"$work/perf.$db.log" &
      perf_pid=$!
      pids+=("$perf_pid")
    fi
    measure "$db" "keys-$db-$n" "$root/bench/scale_keys.lua" SCALE_KEYS="$n"
    if [ -n "$perf_pid" ]; then
      wait "$perf_pid" || true
      forget_pid "$perf_pid"
      echo "== perf, keys $n on $db (whole machine, by command and object):" >&2
      timeout 120 perf report -i "$work/perf.$db.data" --stdio --no-children --sort comm,dso -g none 2>/dev/null |
        grep -v '^#' | grep '%' | head -n 15 | cut -c1-100 >&2 || true
      echo "== perf, keys $n on $db, top symbols:" >&2
      timeout 120 perf report -i "$work/perf.$db.data" --stdio --no-children --sort comm,symbol -g none 2>/dev/null |
        grep -v '^#' | grep '%' | head -n 25 | cut -c1-100 >&2 || true
      perf_pid=""
    fi
    rec keys "$db" "$n" wps "$m_wps"
    rec keys "$db" "$n" p99 "$m_p99"
    rec keys "$db" "$n" written "$m_written"
    rec keys "$db" "$n" bad "$m_bad"
    rec keys "$db" "$n" rss_kb "$(rss_kb)"
    stop_fenced
    store_size "$db" "$store" keys "$n"
    rec keys "$db" "$n" raw $((n * 109))
    say "keys, $db, $n stored: $(printf '%.0f' "$m_wps") writes/s, p99 $m_p99 ms, $m_bad failed," \
      "$(printf '%.0f' "$m_written") bytes written per write, RSS $(get keys "$db" "$n" rss_kb) kB, $(get keys "$db" "$n" size) bytes"
    n0="$n"
  done
  drop_store "$db" "$store"
}

# --- values: PUTs then batches of each size, on one store.
values_bench() {
  local db="$1" store dd_out code size max_body=1MiB batch_body
  store="$(new_store "$db" scale_values)"
  # The disk's sequential write rate, on the file system of the database files.
  dd_out="$(timeout 300 dd if=/dev/zero of="$work/dd" bs=1M count=256 oflag=direct 2>&1)" ||
    { echo "scale_bench: dd failed: $dd_out" >&2; rm -f "$work/dd"; return 1; }
  rm -f "$work/dd"
  rec values "$db" - dd_mbps "$(awk '/copied/ { print $1 / $(NF - 3) / 1e6 }' <<<"$dd_out")"
  say "values, $db: dd bs=1M count=256 oflag=direct: $(grep copied <<<"$dd_out")"
  # For scale, not a target: the same with one fdatasync at the end. On a virtual disk with a
  # cache on the host, oflag=direct alone may stop there; fenced syncs every commit.
  dd_out="$(timeout 300 dd if=/dev/zero of="$work/dd" bs=1M count=256 oflag=direct conv=fdatasync 2>&1)" ||
    { echo "scale_bench: dd failed: $dd_out" >&2; rm -f "$work/dd"; return 1; }
  rm -f "$work/dd"
  rec values "$db" - dd_sync_mbps "$(awk '/copied/ { print $1 / $(NF - 3) / 1e6 }' <<<"$dd_out")"
  say "values, $db: dd bs=1M count=256 oflag=direct conv=fdatasync: $(grep copied <<<"$dd_out")"
  start_fenced "values-$db" "$store"
  # A 1 MiB value alone must fit the default --max-body (1MiB).
  base64 -w0 < <(head -c 786432 /dev/urandom) >"$work/1mib"
  code="$(timeout 60 curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Expect:' -H 'Fencing-Lock: value-holder-0' \
    -H 'Fencing-Token: 1' --data-binary @"$work/1mib" "$fenced_url/v1/objects/v-check")" || true
  if [ "$code" = 413 ]; then
    max_body=2MiB
    echo "scale_bench: a PUT of exactly 1 MiB is refused by the default --max-body (413): PUTs run with --max-body 2MiB" >&2
    stop_fenced
    start_fenced "values-$db-2m" "$store" --max-body "$max_body"
  elif [ "$code" != 201 ]; then
    echo "scale_bench: a PUT of 1 MiB answered ${code:-nothing}, not 201" >&2
    return 1
  fi
  rec values "$db" - put_max_body "$max_body"
  rec values "$db" - put_1mib_status "$code"
  say "values, $db: a PUT of exactly 1 MiB with --max-body $max_body: $code"
  for size in "${value_sizes[@]}"; do
    measure "$db" "put-$db-$size" "$root/bench/scale_values.lua" SCALE_SIZE="$size"
    rec values "$db" "$size" put_wps "$m_wps"
    rec values "$db" "$size" put_mbps "$(awk -v r="$m_wps" -v s="$size" 'BEGIN{print r * s / 1e6}')"
    rec values "$db" "$size" put_bad "$m_bad"
    rec values "$db" "$size" put_amp "$(awk -v w="$m_written" -v s="$size" 'BEGIN { print w / s }')"
    say "values, $db, PUT of $size B: $(printf '%.0f' "$m_wps") writes/s, $(awk -v r="$m_wps" -v s="$size" 'BEGIN{printf "%.1f", r * s / 1e6}') MB/s, p99 $m_p99 ms, $m_bad failed," \
      "$(awk -v w="$m_written" -v s="$size" 'BEGIN { printf "%.2f", w / s }') bytes written per value byte"
  done
  stop_fenced
  # A batch of the largest values and its JSON: the next whole MiB above it.
  batch_body=$(((value_batch * value_sizes[-1] + 64 * value_batch + 1024 + 1048575) / 1048576))
  start_fenced "values-batch-$db" "$store" --max-body "${batch_body}MiB"
  rec values "$db" - batch_max_body "${batch_body}MiB"
  say "values, $db: batches of $value_batch on fenced --max-body ${batch_body}MiB"
  for size in "${value_sizes[@]}"; do
    measure "$db" "batch-$db-$size" "$root/bench/scale_batch.lua" SCALE_SIZE="$size" SCALE_BATCH="$value_batch"
    rec values "$db" "$size" batch_wps "$m_wps"
    rec values "$db" "$size" batch_mbps "$(awk -v r="$m_wps" -v s="$size" 'BEGIN{print r * s / 1e6}')"
    rec values "$db" "$size" batch_bad "$m_bad"
    rec values "$db" "$size" batch_amp "$(awk -v w="$m_written" -v s="$size" 'BEGIN { print w / s }')"
    say "values, $db, batch of $value_batch x $size B: $(printf '%.0f' "$m_wps") writes/s," \
      "$(awk -v r="$m_wps" -v s="$size" 'BEGIN{printf "%.1f", r * s / 1e6}') MB/s, p99 $m_p99 ms, $m_bad failed," \
      "$(awk -v w="$m_written" -v s="$size" 'BEGIN { printf "%.2f", w / s }') bytes written per value byte"
  done
  stop_fenced
  drop_store "$db" "$store"
}

# --- locks: a store per point, 100,000 keys spread over L locks.
locks_bench() {
  local db="$1" store locks key="'l' || $(pad "$1" value 6)"
  for locks in "${lock_points[@]}"; do
    store="$(new_store "$db" "scale_locks_$locks")"
    start_fenced "locks-$db-$locks-schema" "$store"  # makes the schema
    stop_fenced
    load "$db" "$store" "$(fences_sql "$db" 0 $((locks - 1)) "'lock-' || $(pad "$db" value 6)" 1)
$(objects_sql "$db" 0 $((lock_keys - 1)) "$key" "'lock-' || $(pad "$db" "value % $locks" 6)" 1 1)
$(history_sql "$db" $((lock_keys - 10000)) $((lock_keys - 1)) "$key" "'lock-' || $(pad "$db" "value % $locks" 6)" 1 10000)
$(set_counter_sql "$db" "$lock_keys")"
    start_fenced "locks-$db-$locks" "$store"
    check_loaded "l$(printf '%06d' $((lock_keys - 1)))" "lock-$(printf '%06d' $(((lock_keys - 1) % locks)))" 1 "$lock_keys"
    measure "$db" "locks-$db-$locks" "$root/bench/scale_locks.lua" SCALE_LOCKS="$locks" SCALE_LOCK_KEYS="$lock_keys"
    rec locks "$db" "$locks" wps "$m_wps"
    rec locks "$db" "$locks" p99 "$m_p99"
    rec locks "$db" "$locks" bad "$m_bad"
    say "locks, $db, $locks locks: $(printf '%.0f' "$m_wps") writes/s, p99 $m_p99 ms, $m_bad failed"
    stop_fenced
    drop_store "$db" "$store"
  done
}

# --- history: a store per point, its history full: H puts of bench/put.lua's keys by its two
# holders in turn (decision j: holder j % 2, token (j % 2) + 1, key "bench-(j % 2)-((j / 2) %
# 4096)", version j + 1), the objects as the last 8192 of them left them.
history_bench() {
  local db="$1" store h key="'bench-' || (value % 2) || '-' || ((value / 2) % 4096)" lock="'bench-holder-' || (value % 2)"
  for h in "${history_points[@]}"; do
    store="$(new_store "$db" "scale_history_$h")"
    start_fenced "history-$db-$h-schema" "$store"
    stop_fenced
    load "$db" "$store" "$(fences_sql "$db" 0 1 "'bench-holder-' || value" "value + 1")
$(history_sql "$db" 0 $((h - 1)) "$key" "$lock" "(value % 2) + 1" "$h")
$(objects_sql "$db" $((h - 8192)) $((h - 1)) "$key" "$lock" "(value % 2) + 1" 1)
$(set_counter_sql "$db" "$h")"
    start_fenced "history-$db-$h" "$store" --history "$h"
    check_loaded "bench-$(((h - 1) % 2))-$((((h - 1) / 2) % 4096))" "bench-holder-$(((h - 1) % 2))" $(((h - 1) % 2 + 1)) "$h"
    measure "$db" "history-$db-$h" "$root/bench/put.lua"
    rec history "$db" "$h" wps "$m_wps"
    rec history "$db" "$h" p99 "$m_p99"
    rec history "$db" "$h" bad "$m_bad"
    say "history, $db, --history $h: $(printf '%.0f' "$m_wps") writes/s, p99 $m_p99 ms, $m_bad failed"
    stop_fenced
    drop_store "$db" "$store"
  done
}
# with_postgres FUNCTION DB: FUNCTION DB on a fresh PostgreSQL cluster, removed after.
with_postgres() {
  start_postgres scale_bench -c maintenance_work_mem=256MB
  echo "  PostgreSQL $(pg_sql postgres -c 'SHOW server_version' | cut -d' ' -f1) on 127.0.0.1:$pg_port: fsync $(pg_sql postgres -c 'SHOW fsync')," \
    "synchronous_commit $(pg_sql postgres -c 'SHOW synchronous_commit'), wal_sync_method $(pg_sql postgres -c 'SHOW wal_sync_method')" >&2
  "$@"
  stop_postgres
  rm -rf "$work/pg"
}

# get BENCH DB POINT METRIC: a recorded figure (empty when none).
get() {
  awk -v b="$1" -v d="$2" -v p="$3" -v m="$4" '$1 == b && $2 == d && $3 == p && $4 == m { v = $5 } END { print v }' \
    "$work/results"
}

# run_section NAME FUNCTION DB: FUNCTION in a subshell of its own, which stops what it started
# when it ends, whatever ends it: a failure ends that benchmark (its points unmeasured are
# FAILED in the summary), not the others.
run_section() {
  local name="$1" rc=0 pid
  shift
  echo "== $name" >&2
  (
    pids=()
    on_exit 'stop_pids "${pids[@]}"; stop_postgres'
    "$@"
  ) &
  pid=$!
  pids+=("$pid")
  wait "$pid" || rc=$?
  forget_pid "$pid"
  if [ "$rc" -ne 0 ]; then
    echo "scale_bench: $name failed (exit $rc); its points unmeasured are FAILED" >&2
    echo "$name" >>"$work/failed_sections"
  fi
}

commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit+=" (with local changes)"
fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date +%s)"
echo "scale_bench: $(nproc) CPUs, load average $load_before; ${secs}s per run, $rounds round(s), ${warmup}s warm-up; $work on" \
  "$(df -PT "$work" | awk 'NR == 2 { print $2, $1 }')" >&2
for db in "${dbs[@]}"; do
  for bench in "${benches[@]}"; do
    if [ "$db" = pg ]; then
      run_section "$bench on $db" with_postgres "${bench}_bench" "$db"
    else
      run_section "$bench on $db" "${bench}_bench" "$db"
    fi
  done
done
elapsed=$(($(date +%s) - started))

# --- The summary: one row per point and database.
failed=0
: >"$work/summary"
# row POINT DB VALUE VS_SMALLEST TARGET RESULT
row() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/summary"
  [ "$6" != FAILED ] || failed=1
}
# ratio A B: A / B with two decimals and an x ("-" when either is missing).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2fx", a / b }'; }
# judge A OP B: met when A OP B holds (OP: ge, le, within20 meaning 0.8 <= A <= 1.2), else MISSED.
judge() {
  awk -v a="$1" -v op="$2" -v b="${3:-0}" 'BEGIN {
    ok = (op == "ge" && a >= b) || (op == "le" && a <= b) || (op == "within20" && a >= 0.8 && a <= 1.2)
    print (ok ? "met" : "MISSED") }'
}
# good BENCH DB POINT METRIC [BAD_METRIC]: whether the figure was measured, with no failures.
good() { [ -n "$(get "$1" "$2" "$3" "$4")" ] && [ "$(get "$1" "$2" "$3" "${5:-bad}")" = 0 ]; }
pow10() { awk -v n="$1" 'BEGIN { l = int(log(n) / log(10) + 0.5); if (10 ^ l == n) printf "10^%d", l; else print n }'; }
human_size() {
  awk -v s="$1" 'BEGIN { if (s >= 1048576 && s % 1048576 == 0) printf "%d MiB", s / 1048576
    else if (s >= 1024 && s % 1024 == 0) printf "%d KiB", s / 1024; else printf "%d B", s }'
}
bench_ran() { [[ " ${benches[*]} " == *" $1 "* ]]; }
for db in "${dbs[@]}"; do
  if bench_ran keys; then
    n1="${key_points[0]}" nl="${key_points[-1]}"
    w1="$(good keys "$db" "$n1" wps && get keys "$db" "$n1" wps || true)"
    r1="$(get keys "$db" "$n1" rss_kb)"
    s1="$(get keys "$db" "$n1" size)"
    for n in "${key_points[@]}"; do
      p="keys $(pow10 "$n")"
      if good keys "$db" "$n" wps; then
        w="$(get keys "$db" "$n" wps)"
        v="$(awk -v w="$w" -v p="$(get keys "$db" "$n" p99)" -v b="$(get keys "$db" "$n" written)" 'BEGIN {
          printf "%.0f writes/s, p99 %.1f ms, %.1f kB written/write", w, p, b / 1000 }')"
        if [ "$n" = "$n1" ]; then row "$p writes/s" "$db" "$v" "1.00x" "baseline" "-"
        elif [ -z "$w1" ]; then row "$p writes/s" "$db" "$v" "-" "-" FAILED
        elif [ "$n" = "$nl" ]; then
          row "$p writes/s" "$db" "$v" "$(ratio "$w" "$w1")" ">= 0.70x $(pow10 "$n1")" "$(judge "$(awk -v a="$w" -v b="$w1" 'BEGIN{print a / b}')" ge 0.7)"
        else row "$p writes/s" "$db" "$v" "$(ratio "$w" "$w1")" "-" report
        fi
      else
        row "$p writes/s" "$db" "-" "-" "$([ "$n" = "$nl" ] && echo ">= 0.70x $(pow10 "$n1")" || echo -)" FAILED
      fi
      r="$(get keys "$db" "$n" rss_kb)"
      if [ -n "$r" ] && [ -n "$r1" ]; then
        v="$(awk -v r="$r" 'BEGIN { printf "%.1f MiB", r / 1024 }')"
        if [ "$n" = "$n1" ]; then row "$p RSS" "$db" "$v" "1.00x" "baseline" "-"
        else row "$p RSS" "$db" "$v" "$(ratio "$r" "$r1")" "within 20% of $(pow10 "$n1")" "$(judge "$(awk -v a="$r" -v b="$r1" 'BEGIN{print a / b}')" within20)"
        fi
      else
        row "$p RSS" "$db" "-" "-" "within 20% of $(pow10 "$n1")" FAILED
      fi
      s="$(get keys "$db" "$n" size)" raw="$(get keys "$db" "$n" raw)"
      if [ -n "$s" ] && [ -n "$raw" ]; then
        v="$(awk -v s="$s" -v raw="$raw" -v n="$n" -v o="$(get keys "$db" "$n" size_objects)" 'BEGIN {
          printf "%.0f B/key = %.2fx raw (objects alone %.2fx)", s / n, s / raw, o / raw }')"
        row "$p bytes/key" "$db" "$v" "$(ratio "$(awk -v s="$s" -v n="$n" 'BEGIN{print s / n}')" "$(awk -v s="$s1" -v n="$n1" 'BEGIN{print (s == "" ? "" : s / n)}')")" \
          "<= 2x raw (109 B)" "$(judge "$(awk -v a="$s" -v b="$raw" 'BEGIN{print a / b}')" le 2)"
      else
        row "$p bytes/key" "$db" "-" "-" "<= 2x raw (109 B)" FAILED
      fi
    done
  fi
  if bench_ran values; then
    dd="$(get values "$db" - dd_mbps)"
    if [ -n "$dd" ]; then row "values dd oflag=direct" "$db" "$(awk -v d="$dd" 'BEGIN{printf "%.1f MB/s", d}')" "-" "-" "-"
    else row "values dd oflag=direct" "$db" "-" "-" "-" FAILED
    fi
    dd_sync="$(get values "$db" - dd_sync_mbps)"
    if [ -n "$dd_sync" ]; then row "values dd + fdatasync" "$db" "$(awk -v d="$dd_sync" 'BEGIN{printf "%.1f MB/s", d}')" "-" "-" "-"
    else row "values dd + fdatasync" "$db" "-" "-" "-" FAILED
    fi
    for kind in put batch; do
      m1="$(good values "$db" "${value_sizes[0]}" "${kind}_mbps" "${kind}_bad" && get values "$db" "${value_sizes[0]}" "${kind}_mbps" || true)"
      for size in "${value_sizes[@]}"; do
        p="values $([ "$kind" = put ] && echo PUT || echo "batch") $(human_size "$size")"
        target="-"
        [ "$kind" != put ] || [ "$size" != "${value_sizes[-1]}" ] || target=">= 0.5x dd"
        if good values "$db" "$size" "${kind}_mbps" "${kind}_bad"; then
          m="$(get values "$db" "$size" "${kind}_mbps")"
          v="$(awk -v m="$m" -v w="$(get values "$db" "$size" "${kind}_wps")" -v a="$(get values "$db" "$size" "${kind}_amp")" 'BEGIN {
            printf "%.1f MB/s, %.0f writes/s, %.1fx written", m, w, a }')"
          if [ "$target" != "-" ]; then
            if [ -n "$dd" ]; then
              v+=" = $(ratio "$m" "$dd") dd"
              [ -z "$dd_sync" ] || v+=", $(ratio "$m" "$dd_sync") dd + fdatasync"
              result="$(judge "$(awk -v a="$m" -v b="$dd" 'BEGIN{print a / b}')" ge 0.5)"
            else result=FAILED
            fi
          elif [ "$size" = "${value_sizes[0]}" ]; then result="-"; target=baseline
          else result=report
          fi
          row "$p" "$db" "$v" "$(ratio "$m" "$m1")" "$target" "$result"
        else
          row "$p" "$db" "-" "-" "$target" FAILED
        fi
      done
    done
    echo "values on $db: PUTs on fenced --max-body $(get values "$db" - put_max_body) (a PUT of exactly 1 MiB on the default 1MiB:" \
      "$(get values "$db" - put_1mib_status)), batches of $value_batch values on --max-body $(get values "$db" - batch_max_body)" >>"$work/max_bodies"
  fi
  for bench in locks history; do
    bench_ran "$bench" || continue
    if [ "$bench" = locks ]; then points=("${lock_points[@]}") target=">= 0.80x 10"; else points=("${history_points[@]}") target="report"; fi
    b1="$(good "$bench" "$db" "${points[0]}" wps && get "$bench" "$db" "${points[0]}" wps || true)"
    for pt in "${points[@]}"; do
      if [ "$bench" = locks ]; then p="locks $pt"; else p="history --history $pt"; fi
      if good "$bench" "$db" "$pt" wps; then
        w="$(get "$bench" "$db" "$pt" wps)"
        v="$(awk -v w="$w" -v p="$(get "$bench" "$db" "$pt" p99)" 'BEGIN { printf "%.0f writes/s, p99 %.1f ms", w, p }')"
        if [ "$pt" = "${points[0]}" ]; then row "$p" "$db" "$v" "1.00x" baseline "-"
        elif [ -z "$b1" ]; then row "$p" "$db" "$v" "-" "$target" FAILED
        elif [ "$bench" = locks ]; then
          row "$p" "$db" "$v" "$(ratio "$w" "$b1")" "$target" "$(judge "$(awk -v a="$w" -v b="$b1" 'BEGIN{print a / b}')" ge 0.8)"
        else row "$p" "$db" "$v" "$(ratio "$w" "$b1")" "$target" report
        fi
      else
        row "$p" "$db" "-" "-" "$([ "$pt" = "${points[0]}" ] && echo baseline || echo "$target")" FAILED
      fi
    done
  done
done

# --- The plot: writes/s against keys stored (relative to the fewest), and MB/s per value size.
awk -v title="fenced scale, $commit, $(date -u +%Y-%m-%d), $(nproc) CPUs, ${secs}s runs x $rounds" '
  function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
  function lg(v) { return log(v) / log(10) }
  $1 == "keys" && $4 == "wps" { kw[$2, $3] = $5; kp[$3] = 1; kd[$2] = 1 }
  $1 == "keys" && $4 == "bad" { kbad[$2, $3] = $5 }
  $1 == "values" && ($4 == "put_mbps" || $4 == "batch_mbps") { k = $4; sub(/_mbps/, "", k); vm[$2, k, $3] = $5; vs[$3] = 1; vd[$2] = 1 }
  $1 == "values" && $4 == "dd_mbps" { dd[$2] = $5 }
  END {
    W = 980; H = 540
    color["sqlite"] = "#1f77b4"; color["pg"] = "#d62728"
    name["sqlite"] = "SQLite"; name["pg"] = "PostgreSQL"; dbname[1] = "sqlite"; dbname[2] = "pg"
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H
    printf "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H
    printf "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n", W / 2, esc(title)
    # Panel 1: keys. x: log10(keys), y: writes/s / writes/s at the fewest keys.
    x0 = 70; y0 = 360; pw = 360; ph = 280
    nk = 0; for (p in kp) ks[++nk] = p + 0
    for (i = 1; i <= nk; i++) for (j = i + 1; j <= nk; j++) if (ks[j] < ks[i]) { t = ks[i]; ks[i] = ks[j]; ks[j] = t }
    ymax = 1.2
    for (d in kd) if (kw[d, ks[1]] > 0) for (i = 1; i <= nk; i++) if (kw[d, ks[i]] / kw[d, ks[1]] * 1.1 > ymax) ymax = kw[d, ks[i]] / kw[d, ks[1]] * 1.1
    ymax = int(ymax * 5 + 0.999) / 5
    xmin = (nk ? int(lg(ks[1]) + 1e-9) : 3); xmax = (nk ? int(lg(ks[nk]) + 0.999) : 7); if (xmax <= xmin) xmax = xmin + 1
    printf "<text x=\"%d\" y=\"50\" text-anchor=\"middle\" font-size=\"13\">keys stored: writes/s relative to the fewest (c64, 90%% PUT)</text>\n", x0 + pw / 2
    for (v = 0; v <= ymax + 1e-9; v += 0.2) {
      y = y0 - v / ymax * ph
      printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x0 + pw, y
      printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1fx</text>\n", x0 - 6, y + 4, v
    }
    for (e = xmin; e <= xmax; e++) {
      x = x0 + (e - xmin) / (xmax - xmin) * pw
      printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, y0 - ph, x, y0
      printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">10<tspan dy=\"-6\" font-size=\"9\">%d</tspan></text>\n", x, y0 + 18, e
    }
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0 + pw, y0
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y0 - ph
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">keys stored (log scale)</text>\n", x0 + pw / 2, y0 + 40
    y = y0 - 0.7 / ymax * ph
    printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#666\" stroke-dasharray=\"6,4\"/>\n", x0, y, x0 + pw, y
    printf "<text x=\"%d\" y=\"%.1f\" fill=\"#666\">target 0.7x</text>\n", x0 + 6, y - 5
    li = 0
    for (di = 1; di <= 2; di++) {
      d = dbname[di]
      if (!(d in kd) || !(kw[d, ks[1]] > 0)) continue
      pts = ""
      for (i = 1; i <= nk; i++) {
        if (!(kw[d, ks[i]] > 0)) continue
        x = x0 + (lg(ks[i]) - xmin) / (xmax - xmin) * pw; y = y0 - kw[d, ks[i]] / kw[d, ks[1]] / ymax * ph
        pts = pts sprintf("%.1f,%.1f ", x, y)
        printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x, y, color[d]
      }
      printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, color[d]
      ly = y0 + 66 + 18 * li++
      printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", x0 + 12, ly - 4, x0 + 36, ly - 4, color[d]
      printf "<text x=\"%d\" y=\"%d\">%s (%.0f writes/s at 10<tspan dy=\"-6\" font-size=\"9\">%d</tspan><tspan dy=\"6\">)</tspan></text>\n", x0 + 42, ly, name[d], kw[d, ks[1]], int(lg(ks[1]) + 0.5)
    }
    # Panel 2: values. x: log10(value size), y: log10(MB/s).
    x0 = 590; pw = 360
    nv = 0; for (s in vs) ss[++nv] = s + 0
    for (i = 1; i <= nv; i++) for (j = i + 1; j <= nv; j++) if (ss[j] < ss[i]) { t = ss[i]; ss[i] = ss[j]; ss[j] = t }
    lo = 1e18; hi = 0
    for (k in vm) if (vm[k] > 0) { if (vm[k] < lo) lo = vm[k]; if (vm[k] > hi) hi = vm[k] }
    for (d in dd) if (dd[d] > 0) { if (dd[d] / 2 < lo) lo = dd[d] / 2; if (dd[d] / 2 > hi) hi = dd[d] / 2 }
    if (hi == 0) { lo = 1; hi = 10 }
    ylo = int(lg(lo) + 100) - 100; yhi = -int(-lg(hi) + 100) + 100; if (yhi <= ylo) yhi = ylo + 1
    printf "<text x=\"%d\" y=\"50\" text-anchor=\"middle\" font-size=\"13\">value size: MB/s written (c64)</text>\n", x0 + pw / 2
    for (e = ylo; e <= yhi; e++) {
      y = y0 - (e - ylo) / (yhi - ylo) * ph
      printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x0 + pw, y
      printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 6, y + 4, (e >= 0 ? sprintf("%d", 10 ^ e) : sprintf("%g", 10 ^ e))
    }
    xl = 2; xh = lg(1048576)
    split("100 B,1 KiB,10 KiB,100 KiB,1 MiB", tl, ",")
    split("100 1024 10240 102400 1048576", tv, " ")
    for (i = 1; i <= 5; i++) {
      x = x0 + (lg(tv[i]) - xl) / (xh - xl) * pw
      printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, y0 - ph, x, y0
      printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, y0 + 18, tl[i]
    }
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0 + pw, y0
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y0 - ph
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">value size (log scale)</text>\n", x0 + pw / 2, y0 + 40
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">MB/s (log scale)</text>\n", x0 - 45, y0 - ph / 2, x0 - 45, y0 - ph / 2
    li = 0
    for (di = 1; di <= 2; di++) {
      d = dbname[di]
      if (!(d in vd)) continue
      if (dd[d] > 0) {
        y = y0 - (lg(dd[d] / 2) - ylo) / (yhi - ylo) * ph
        printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"2,3\"/>\n", x0, y, x0 + pw, y, color[d]
      }
      for (kind = 1; kind <= 2; kind++) {
        k = (kind == 1 ? "put" : "batch")
        pts = ""
        for (i = 1; i <= nv; i++) {
          if (!(vm[d, k, ss[i]] > 0)) continue
          x = x0 + (lg(ss[i]) - xl) / (xh - xl) * pw; y = y0 - (lg(vm[d, k, ss[i]]) - ylo) / (yhi - ylo) * ph
          pts = pts sprintf("%.1f,%.1f ", x, y)
          if (k == "put") printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x, y, color[d]
          else printf "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"white\" stroke=\"%s\"/>\n", x - 3.5, y - 3.5, color[d]
        }
        if (pts == "") continue
        printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", pts, color[d], (k == "batch" ? " stroke-dasharray=\"7,4\"" : "")
        ly = y0 + 66 + 18 * li++
        printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x0 + 12, ly - 4, x0 + 36, ly - 4, color[d], (k == "batch" ? " stroke-dasharray=\"7,4\"" : "")
        printf "<text x=\"%d\" y=\"%d\">%s %s</text>\n", x0 + 42, ly, name[d], (k == "put" ? "PUT" : "batch of 8")
      }
      if (dd[d] > 0) {
        ly = y0 + 66 + 18 * li++
        printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"2,3\"/>\n", x0 + 12, ly - 4, x0 + 36, ly - 4, color[d]
        printf "<text x=\"%d\" y=\"%d\">target: 0.5 x dd (%.0f MB/s), %s run</text>\n", x0 + 42, ly, dd[d], name[d]
      }
    }
    print "</svg>"
  }' "$work/results" >"$svg"

echo
echo "Scale: wrk -t2 -c64, writes/s accepted over ${secs}s after ${warmup}s, $rounds round(s) per point ($(nproc) CPUs, loopback;"
echo "load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; $((elapsed / 60)) min $((elapsed % 60)) s)"
[ ! -f "$work/max_bodies" ] || sed 's/^/  /' "$work/max_bodies"
echo "  written: bytes written per write (keys) or per value byte (values): SQLite, by fenced's write calls (WAL,"
echo "  checkpoints, HTTP answers); PostgreSQL, WAL only. Raw bytes of a key: 9-byte key + 100-byte value."
printf "%-26s %-7s %-62s %-11s %-20s %s\n" point db value "vs smallest" target result
while IFS=$'\t' read -r p d v r t res; do
  printf "%-26s %-7s %-62s %-11s %-20s %s\n" "$p" "$d" "$v" "$r" "$t" "$res"
done <"$work/summary"
echo "commit $commit"
if [ "$svg_is_temp" -eq 1 ]; then echo "plot: $svg (a temporary file)"; else echo "plot: $svg"; fi
if [ -s "$work/failed_sections" ]; then
  echo "failed: $(paste -sd, "$work/failed_sections" | sed 's/,/, /g')"
fi
[ "$failed" -eq 0 ] || { echo "scale_bench: some points FAILED" >&2; exit 1; }
