#!/usr/bin/env bash
# The guard on PostgreSQL: durable fenced writes/s through `fenced --db postgresql://...` beside
# the same guarded write done directly with pgbench, on one PostgreSQL server this script starts
# itself (fsync on, synchronous_commit on: the same durability for every arm), in the same run,
# ROUNDS rounds with the arms' order rotated each round; medians and ratios printed, with the
# CPU time per write of the PostgreSQL server and of fenced (less moved by a busy machine than
# writes/s). Arm a is measured over a window in its steady state (see run_a).
#   a. pgbench -M prepared -c64 -j2, bench/guarded_upsert.sql: one transaction per write that
#      advances the writer's fence (the guarded upsert of fencekit_advance) and upserts the object
#   b. fenced on PostgreSQL, wrk -t2 -c64 with bench/put.lua
#   c. two fenced processes on the same database, one wrk -t2 -c32 each at once (total writes/s),
#      each wrk with holders (locks) and keys of its own (bench/put_prefixed.lua)
#   cs. the same, but both wrk with put.lua: the same two holders write through both fenced.
#       With fenced's default --batch-linger auto, each fenced, seeing the other commit to the
#       database, waits up to 100us after a transaction of several writes for more to join the
#       next, so that the two commit batches as large as one fenced does
#   cs0. as cs, but each of its two fenced (their own, started for it) with --batch-linger 0:
#       what the linger buys two fenced
#   b0. as b, but its fenced (its own) with --batch-linger 0: one fenced alone never lingers, so
#       b / b0 is 1 but for noise
#   cx. control for c and cs: two fenced on two databases of the server (nothing shared but the
#       server and its WAL), one wrk -t2 -c32 each with put.lua. cs / cx is what sharing the
#       holders' rows costs; cx / b what splitting the load over two fenced costs
#   b2. control for the load generator: one fenced, two wrk -t2 -c32 at once with holders of
#       their own (put_prefixed.lua), as arm c drives its two fenced. b2 / b is what the two wrk
#       processes cost
#   d. fenced on SQLite (a file, durability full), wrk -t2 -c64, beside them
# Loopback only; everything started here is stopped on exit, also on failure or Ctrl-C. Builds
# nothing: give the fenced binary in $FENCED.
#
# Usage: bench/pg_bench.sh [seconds per run, default 10] [rounds, default 3]
#   FENCED=path/to/fenced   (default build/bench/tools/fenced)
#   PG_BIN=dir              PostgreSQL's initdb, postgres, pgbench, psql (default the newest
#                           /usr/lib/postgresql/*/bin)
#   FENCED_ARGS="..."       extra options for every fenced, e.g. "--threads 2"
#   PG_BENCH_ARMS="a b c cs d" the arms to run (default a b c cs d; b0, cs0 and the controls cx and
#                           b2 when named; "a" needs no fenced)
#   PG_BENCH_WARMUP=6       seconds pgbench runs before arm a's window (see run_a)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, wrk_figures, stop_pids, on_exit
fenced="${FENCED:-$root/build/bench/tools/fenced}"
secs="${1:-10}"
rounds="${2:-3}"
pg_bin="${PG_BIN:-$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1)}"
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "pg_bench: $tool is not installed (./scripts/bench pg installs it)" >&2; exit 1; }
done
for b in initdb postgres pg_ctl pgbench psql; do
  [ -x "$pg_bin/$b" ] || { echo "pg_bench: no $b in '$pg_bin'; install postgresql-15 or set PG_BIN" >&2; exit 1; }
done
arms=()
for arm in ${PG_BENCH_ARMS:-a b c cs d}; do
  case "$arm" in a | b | b0 | b2 | c | cs | cs0 | cx | d) arms+=("$arm") ;; *) echo "pg_bench: unknown arm '$arm' in PG_BENCH_ARMS; use a, b, b0, c, cs, cs0, d, cx, b2" >&2; exit 2 ;; esac
done
[ "${#arms[@]}" -gt 0 ] || { echo "pg_bench: PG_BENCH_ARMS names no arm" >&2; exit 2; }
wants() { [[ " ${arms[*]} " == *" $1 "* ]]; }
if wants b || wants b0 || wants b2 || wants c || wants cs || wants cs0 || wants cx || wants d; then
  [ -x "$fenced" ] || { echo "pg_bench: no fenced binary at $fenced; build it or set FENCED" >&2; exit 1; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-pg-bench.XXXXXX")"
pgdata="$work/pg/data"
pids=()
pg_pid=""
cleanup() {
  stop_pids "${pids[@]}"
  stop_postgres
  rm -rf "$work"
}
on_exit cleanup

# --- PostgreSQL: a fresh cluster in $work, owned by the postgres user when root.
start_postgres pg_bench
sql() { "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 -Atq "$@"; }
sql -d postgres -c 'CREATE DATABASE fencekit'
if wants cx; then sql -d postgres -c 'CREATE DATABASE fencekit_other'; fi
# Arm a's own tables, beside the schema fencekit that fenced makes in the same database.
sql -d fencekit <<'SQL'
CREATE SCHEMA baseline;
CREATE TABLE baseline.fences (lock bytea PRIMARY KEY, highest bigint NOT NULL CHECK (highest >= 1));
CREATE TABLE baseline.objects (key bytea PRIMARY KEY, value bytea NOT NULL, lock bytea NOT NULL,
                               token bigint NOT NULL, version bigint NOT NULL);
SQL
pg_url="postgresql://postgres@127.0.0.1:$pg_port/fencekit"

# --- fenced: two on the database (arms b and c), one on SQLite (arm d).
# start_fenced NAME DB [OPTION...]: starts fenced on a free port; sets url_NAME.
start_fenced() {
  local name="$1" db="$2" url
  shift 2
  # shellcheck disable=SC2086  # FENCED_ARGS is a list of options
  "$fenced" --listen 127.0.0.1:0 --db "$db" --durability full ${FENCED_ARGS:-} "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  url="$(fenced_url "$work/$name.log" "${pids[-1]}")"
  [ -n "$url" ] || { echo "pg_bench: fenced ($name, --db $db) did not start:" >&2; cat "$work/$name.log" >&2; exit 1; }
  declare -g "url_$name=$url" "pid_$name=${pids[-1]}"
}
# One after the other: the first makes the schema.
if wants b || wants b2 || wants c || wants cs || wants cs0 || wants cx || wants b0; then start_fenced pg1 "$pg_url"; fi
if wants c || wants cs; then start_fenced pg2 "$pg_url"; fi
if wants cs0; then
  start_fenced pgl1 "$pg_url" --batch-linger 0
  start_fenced pgl2 "$pg_url" --batch-linger 0
fi
if wants b0; then start_fenced pg0 "$pg_url" --batch-linger 0; fi
if wants cx; then start_fenced pgx "${pg_url%/fencekit}/fencekit_other"; fi
if wants d; then start_fenced lite "$work/sqlite.db"; fi
sleep 0.5

echo "PostgreSQL $(sql -d fencekit -c 'SHOW server_version') on 127.0.0.1:$pg_port: fsync $(sql -d fencekit -c 'SHOW fsync')," \
  "synchronous_commit $(sql -d fencekit -c 'SHOW synchronous_commit'), wal_sync_method $(sql -d fencekit -c 'SHOW wal_sync_method')" >&2
echo "fenced's connections to the database (idle): $(sql -d fencekit -c \
  "SELECT count(*) FROM pg_stat_activity WHERE datname = 'fencekit' AND pid <> pg_backend_pid()")" >&2

# The sum and count of fenced_commit_batch_size of the fenced at URL.
batch_counters() {
  curl -s "$1/metrics" |
    awk '$1=="fenced_commit_batch_size_sum"{s=$2} $1=="fenced_commit_batch_size_count"{c=$2} END{print s+0, c+0}'
}


# CPU time, which a busy machine does not inflate the way it does wall time: the ticks a
# process has used (user + system), and those of the whole PostgreSQL server (the postmaster,
# its live children, and the backends that have exited, which the postmaster has reaped).
clk_tck="$(getconf CLK_TCK)"
postmaster() { head -n1 "$pgdata/postmaster.pid"; }
proc_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_ticks() {
  local pm p line f t=0
  pm="$(postmaster)"
  # Read with builtins, no process per child: a pass over 70 backends takes milliseconds, and a
  # child that exits meanwhile is skipped (its time moves to the postmaster's once reaped).
  for p in "$pm" $(pgrep -P "$pm"); do
    { read -r line <"/proc/$p/stat"; } 2>/dev/null || continue
    read -r -a f <<<"${line##*) }"  # state ppid ... utime(11) stime(12) cutime(13) cstime(14)
    t=$((t + f[11] + f[12]))
    [ "$p" != "$pm" ] || t=$((t + f[13] + f[14]))
  done
  echo "$t"
}
# us_per TICKS WRITES: microseconds of CPU per write.
us_per() { awk -v t="$1" -v n="$2" -v hz="$clk_tck" 'BEGIN{print (n > 0 && t >= 0 ? sprintf("%.0f", t * 1e6 / hz / n) : "-")}'; }
# per_commit SUM COUNT: mean writes per commit from fenced_commit_batch_size deltas.
per_commit() { awk -v s="$1" -v c="$2" 'BEGIN{print (c > 0 ? sprintf("%.1f", s / c) : "-")}'; }

# Every result line: "ARM writes/s p99_ms failures writes/commit round
# server_cpu_us_per_write fenced_cpu_us_per_write" ("-" where it does not apply).
record() { echo "$*" >>"$work/results"; echo "  $*" >&2; }

# Arm a measures a window of $secs in the steady state: pgbench opens 64 new connections per
# run, and each new backend's first transactions (its connection, catalog caches, preparing the
# statement) would otherwise count, where fenced's connection is long open. pgbench runs
# $warmup + 2 s longer than the window, which starts 1 s after every client has connected (or
# $warmup s after the start, whichever is later), so that it ends before pgbench winds down.
warmup="${PG_BENCH_WARMUP:-6}"
now() { date +%s.%N; }
token_base=0
run_a() {
  local out="$work/a.round$round.txt" before after processed bad=0 p99 t0 t1 s0 s1 w0 w1 start pg
  token_base=$((token_base + 1000000000))  # above every token of the previous runs
  before="$(sql -d fencekit -c 'SELECT coalesce(sum(version), 0) FROM baseline.objects')"
  rm -f "$work"/pgbench_log*
  start="$(now)"
  "$pg_bin/pgbench" -n -M prepared -c 64 -j 2 -T "$((secs + warmup + 2))" -D "token=$token_base" \
    -f "$root/bench/guarded_upsert.sql" -l --log-prefix="$work/pgbench_log" --sampling-rate=0.1 \
    -h 127.0.0.1 -p "$pg_port" -U postgres fencekit >"$out" 2>&1 &
  pg=$!
  pids+=("$pg")
  # Every client connected and past its first write: all 64 have a query.
  while kill -0 "$pg" 2>/dev/null; do
    [ "$(sql -d fencekit -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench' \
      AND query LIKE 'WITH fence%'")" -ge 64 ] && break
    sleep 0.1
  done
  sleep 1
  while kill -0 "$pg" 2>/dev/null && awk -v s="$start" -v n="$(now)" -v w="$warmup" 'BEGIN{exit !(n < s + w)}'; do sleep 0.1; done
  w0="$(now)" s0="$(sql -d fencekit -c 'SELECT coalesce(sum(version), 0) FROM baseline.objects')" t0="$(pg_ticks)"
  while kill -0 "$pg" 2>/dev/null && awk -v s="$w0" -v n="$(now)" -v w="$secs" 'BEGIN{exit !(n < s + w)}'; do sleep 0.1; done
  w1="$(now)" s1="$(sql -d fencekit -c 'SELECT coalesce(sum(version), 0) FROM baseline.objects')" t1="$(pg_ticks)"
  wait "$pg" || bad=1
  unset 'pids[-1]'
  after="$(sql -d fencekit -c 'SELECT coalesce(sum(version), 0) FROM baseline.objects')"
  processed="$(awk '/number of transactions actually processed:/ {print $NF}' "$out" | cut -d/ -f1)"
  if [ "$bad" -ne 0 ] || [ -z "$processed" ]; then
    echo "pg_bench: pgbench failed:" >&2
    cat "$out" >&2
    exit 1
  fi
  if awk -v a="$w0" -v b="$w1" -v w="$secs" 'BEGIN{exit !(b - a < w / 2)}'; then
    echo "pg_bench: pgbench's steady state lasted only $(awk -v a="$w0" -v b="$w1" 'BEGIN{printf "%.1f", b - a}') s" \
      "of the $secs s window; raise PG_BENCH_WARMUP (now $warmup s)" >&2
  fi
  # Over the whole run: processed but not accepted (stale, so nothing written) counts as
  # failed, with pgbench's own failures.
  bad=$((processed - (after - before) + $(awk '/number of failed transactions:/ {n = $5} END{print n + 0}' "$out")))
  # pgbench logs one in ten transactions: latency in us (third field), end time in s and us.
  p99="$(cat "$work"/pgbench_log* | awk -v a="$w0" -v b="$w1" '{e = $5 + $6 / 1e6} e >= a && e <= b {print $3 / 1000}' |
    sort -g | awk '{v[NR]=$1} END{i = int(NR * 0.99); if (i < 1) i = 1; print (NR ? v[i] : 0)}')"
  record a "$(awk -v n="$((s1 - s0))" -v a="$w0" -v b="$w1" 'BEGIN{printf "%.1f", n / (b - a)}')" "$p99" "$bad" - \
    "$round" "$(us_per "$((t1 - t0))" "$((s1 - s0))")" -
}

# run_wrk ARM NAME: wrk -t2 -c64 with put.lua against fenced NAME.
run_wrk() {
  local arm="$1" name="$2" url_var="url_$2" pid_var="pid_$2" before after f t0 t1 p0 p1
  local out="$work/$1.round$round.txt"
  read -r -a before < <(batch_counters "${!url_var}")
  t0="$(pg_ticks)" p0="$(proc_ticks "${!pid_var}")"
  wrk -t2 -c64 -d"${secs}s" --latency -s "$root/bench/put.lua" "${!url_var}" >"$out" &
  pids+=($!)
  wait "${pids[-1]}"
  unset 'pids[-1]'
  t1="$(pg_ticks)" p1="$(proc_ticks "${!pid_var}")"
  read -r -a after < <(batch_counters "${!url_var}")
  read -r -a f < <(wrk_figures "$out")
  local server="-"
  [ "$name" = lite ] || server="$(us_per "$((t1 - t0))" "${f[3]}")"
  record "$arm" "${f[0]}" "${f[1]}" "${f[2]}" "$(per_commit "$((after[0] - before[0]))" "$((after[1] - before[1]))")" \
    "$round" "$server" "$(us_per "$((p1 - p0))" "${f[3]}")"
}

# run_c ARM: two wrk -t2 -c32 at once; for arm c against the two fenced on the database, each
# with holders and keys of its own; for cs the same with put.lua's (the same holders); for cx
# against the fenced of each database, with put.lua; for b2 both against one fenced, each with
# holders of its own.
run_c() {
  local arm="$1" f1 f2 w1 w2 t0 t1 p0 p1 n before after name
  local script1="$root/bench/put.lua" script2="$root/bench/put.lua" names=(pg1)
  case "$arm" in
    c | b2) script1="$root/bench/put_prefixed.lua" script2="$root/bench/put_prefixed.lua" ;;
  esac
  case "$arm" in
    c | cs) names+=(pg2) ;;
    cs0) names=(pgl1 pgl2) ;;
    cx) names+=(pgx) ;;
  esac
  # The first wrk drives the first fenced, the second the last (the same one for b2).
  local url1_var="url_${names[0]}" url2_var="url_${names[-1]}"
  # Over the fenced of this arm: "CPU_ticks batched_writes commits".
  fenced_totals() {
    local t=0 s=0 c=0 pid_var url_var counters
    for name in "${names[@]}"; do
      pid_var="pid_$name" url_var="url_$name"
      read -r -a counters < <(batch_counters "${!url_var}")
      t=$((t + $(proc_ticks "${!pid_var}"))) s=$((s + counters[0])) c=$((c + counters[1]))
    done
    echo "$t $s $c"
  }
  read -r -a before < <(fenced_totals)
  t0="$(pg_ticks)"
  BENCH_PREFIX=one- wrk -t2 -c32 -d"${secs}s" --latency -s "$script1" "${!url1_var}" >"$work/c1.round$round.txt" &
  w1=$!
  pids+=("$w1")
  BENCH_PREFIX=two- wrk -t2 -c32 -d"${secs}s" --latency -s "$script2" "${!url2_var}" >"$work/c2.round$round.txt" &
  w2=$!
  pids+=("$w2")
  wait "$w1"
  wait "$w2"
  # The two wrk, the last two: one at a time, as an unset shifts what [-2] names.
  unset 'pids[-1]'
  unset 'pids[-1]'
  t1="$(pg_ticks)"
  read -r -a after < <(fenced_totals)
  read -r -a f1 < <(wrk_figures "$work/c1.round$round.txt")
  read -r -a f2 < <(wrk_figures "$work/c2.round$round.txt")
  n=$((f1[3] + f2[3]))
  p0="${before[0]}" p1="${after[0]}"
  echo "  ($arm: ${f1[0]} + ${f2[0]} req/s)" >&2
  record "$arm" "$(awk -v x="${f1[0]}" -v y="${f2[0]}" 'BEGIN{print x + y}')" \
    "$(awk -v x="${f1[1]}" -v y="${f2[1]}" 'BEGIN{print (x > y ? x : y)}')" "$((f1[2] + f2[2]))" \
    "$(per_commit "$((after[1] - before[1]))" "$((after[2] - before[2]))")" \
    "$round" "$(us_per "$((t1 - t0))" "$n")" "$(us_per "$((p1 - p0))" "$n")"
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  # Rotate the order, so no arm always runs first or right after another's WAL/fsync backlog.
  order=()
  for i in "${!arms[@]}"; do order+=("${arms[$(((i + round - 1) % ${#arms[@]}))]}"); done
  echo "round $round/$rounds (${secs}s per run): ${order[*]}" >&2
  for arm in "${order[@]}"; do
    case "$arm" in
      a) run_a ;;
      b) run_wrk b pg1 ;;
      b0) run_wrk b0 pg0 ;;
      b2 | c | cs | cs0 | cx) run_c "$arm" ;;
      d) run_wrk d lite ;;
    esac
  done
done

col() { awk -v n="$1" -v c="$2" '$1==n{print $c}' "$work/results"; }
# The median over rounds of arm X's writes/s divided by arm Y's in the same round.
round_ratio() {
  awk -v x="$1" -v y="$2" '$1==x{a[$6]=$2} $1==y{b[$6]=$2} END{for (r in a) if (b[r] > 0) print a[r] / b[r]}' \
    "$work/results" | median
}

echo
echo "PostgreSQL: medians of $rounds rounds of ${secs}s each ($(nproc) CPUs, loopback, one PostgreSQL $(sql -d fencekit -c 'SHOW server_version'),"
echo "fsync on, synchronous_commit on; load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after)"
printf "%-52s %9s %8s %8s %8s %12s %12s\n" "run" "writes/s" "p99 ms" "failures" "w/commit" \
  "pg us/write" "fenced us/w"
declare -A label=(
  [a]="a. pgbench guarded upsert, -c64 -j2"
  [b]="b. fenced on PostgreSQL, wrk -c64"
  [c]="c. 2 fenced on PostgreSQL, own holders, 2 wrk -c32"
  [cs]="cs. 2 fenced on PostgreSQL, same holders, 2 wrk -c32"
  [cs0]="cs0. as cs, both fenced --batch-linger 0"
  [b0]="b0. as b, fenced --batch-linger 0"
  [cx]="cx. 2 fenced on 2 databases, 2 wrk -c32 (control)"
  [b2]="b2. 1 fenced, 2 wrk -c32, own holders (control)"
  [d]="d. fenced on SQLite (durability full), wrk -c64"
)
rps_a=0 rps_b=0 rps_b0=0 rps_c=0 rps_cs=0 rps_cs0=0 rps_d=0 rps_cx=0 rps_b2=0 pgus_a=0 pgus_b=0
bad_a=0 bad_b=0 bad_b0=0 bad_c=0 bad_cs=0 bad_cs0=0 bad_d=0 bad_cx=0 bad_b2=0
for arm in "${arms[@]}"; do
  rps="$(col "$arm" 2 | median)"
  p99="$(col "$arm" 3 | median)"
  bad="$(col "$arm" 4 | awk '{s+=$1} END{print s+0}')"
  wpc="$(col "$arm" 5 | awk '$1 != "-"' | median)"
  [ "$arm" = a ] && wpc="-"
  pgus="$(col "$arm" 7 | awk '$1 != "-"' | median)"
  [ "$arm" = d ] && pgus="-"
  fus="$(col "$arm" 8 | awk '$1 != "-"' | median)"
  [ "$arm" = a ] && fus="-"
  printf "%-52s %9.0f %8.2f %8d %8s %12s %12s\n" "${label[$arm]}" "$rps" "$p99" "$bad" "$wpc" "$pgus" "$fus"
  declare "rps_$arm=$rps" "bad_$arm=$bad" "pgus_$arm=$pgus"
done
echo
awk -v a="$rps_a" -v b="$rps_b" -v c="$rps_c" -v cs="$rps_cs" -v d="$rps_d" \
    -v rb="$(round_ratio b a)" -v rc="$(round_ratio c a)" -v rcb="$(round_ratio c b)" \
    -v rcsb="$(round_ratio cs b)" -v rd="$(round_ratio d a)" -v cx="$rps_cx" -v b2="$rps_b2" \
    -v rcscx="$(round_ratio cs cx)" -v rcxb="$(round_ratio cx b)" -v rb2b="$(round_ratio b2 b)" \
    -v rcsb2="$(round_ratio cs b2)" -v cs0="$rps_cs0" -v rcscs0="$(round_ratio cs cs0)" \
    -v b0="$rps_b0" -v rbb0="$(round_ratio b b0)" \
    -v bad="$((bad_a + bad_b + bad_b0 + bad_c + bad_cs + bad_cs0 + bad_d + bad_cx + bad_b2))" -v ua="$pgus_a" -v ub="$pgus_b" 'BEGIN{
  if (a > 0 && b > 0) {
    ba = b / a
    printf "b/a fenced on PostgreSQL / pgbench:     %.2fx (median of per-round ratios %.2fx; target >= 1.5x: %s)\n",
           ba, rb, (ba >= 1.5 ? "met" : "not met")
  }
  if (a > 0 && c > 0) printf "c/a two fenced on PostgreSQL / pgbench: %.2fx (per-round %.2fx)\n", c / a, rc
  if (b > 0 && c > 0) printf "c/b two fenced / one fenced:            %.2fx (per-round %.2fx)\n", c / b, rcb
  if (b > 0 && cs > 0) printf "cs/b two fenced, same holders / one:    %.2fx (per-round %.2fx; target >= 0.9x: %s)\n", cs / b, rcsb, (cs / b >= 0.9 ? "met" : "not met")
  if (cs > 0 && cs0 > 0) printf "cs/cs0 what the linger buys two fenced: %.2fx (per-round %.2fx)\n", cs / cs0, rcscs0
  if (b > 0 && b0 > 0) printf "b/b0 one fenced, auto / no linger:      %.2fx (per-round %.2fx; target: no lower, >= 0.95x for noise: %s)\n", b / b0, rbb0, (b / b0 >= 0.95 ? "met" : "not met")
  if (cx > 0 && cs > 0) printf "cs/cx sharing holders / sharing nothing: %.2fx (per-round %.2fx: what sharing costs)\n", cs / cx, rcscx
  if (b > 0 && cx > 0) printf "cx/b two fenced sharing nothing / one:  %.2fx (per-round %.2fx: what the split costs)\n", cx / b, rcxb
  if (b > 0 && b2 > 0) printf "b2/b one fenced, two wrk / one wrk:     %.2fx (per-round %.2fx: what the two wrk cost)\n", b2 / b, rb2b
  if (b2 > 0 && cs > 0) printf "cs/b2 two fenced / one, both by two wrk: %.2fx (per-round %.2fx)\n", cs / b2, rcsb2
  if (a > 0 && d > 0) printf "d/a fenced on SQLite / pgbench:         %.2fx (per-round %.2fx)\n", d / a, rd
  if (b > 0 && d > 0) printf "b/d fenced on PostgreSQL / on SQLite:   %.2fx\n", b / d
  if (ua > 0 && ub > 0) printf "PostgreSQL CPU per write, a/b:          %.1fx (%d us for pgbench, %d us through fenced)\n", ua / ub, ua, ub
  if (bad > 0) printf "WARNING: %d writes failed (non-2xx, socket errors, or pgbench writes not accepted)\n", bad
}'
