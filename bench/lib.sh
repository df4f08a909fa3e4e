# Shared by the bench/*.sh scripts. Sourced, not run.

# find_lock_bench: prints the lock_bench binary: $LOCK_BENCH, else the most recently built of
# build/{bench,lockbench}/bench/lock_bench and build/release/bench/lock_bench; fails with the
# commands that build it.
find_lock_bench() {
  local root="$1" bench="${LOCK_BENCH:-}" b
  if [ -z "$bench" ]; then
    for b in "$root/build/bench/bench/lock_bench" "$root/build/lockbench/bench/lock_bench" \
        "$root/build/release/bench/lock_bench"; do
      if [ -x "$b" ] && { [ -z "$bench" ] || [ "$b" -nt "$bench" ]; }; then bench="$b"; fi
    done
  fi
  if [ -z "$bench" ] || [ ! -x "$bench" ]; then
    echo "lock_bench not built; e.g.:" >&2
    echo "  cmake -S . -B build/lockbench -G Ninja -DCMAKE_BUILD_TYPE=Release -DFENCEKIT_BUILD_TESTS=OFF" >&2
    echo "  cmake --build build/lockbench --target lock_bench" >&2
    return 1
  fi
  echo "$bench"
}

# median: the median of the numbers on stdin, one per line (0 when there are none).
median() {
  sort -g | awk '{a[NR]=$1} END{if (NR==0) print 0; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

# fenced_url LOG PID: waits until the fenced of PID says in LOG that it listens (at most 30 s;
# less when it exits first) and prints its URL; prints nothing when it never did.
fenced_url() {
  local _
  for _ in $(seq 600); do
    grep -q "listening on" "$1" && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  grep -o 'http://127\.0\.0\.1:[0-9]*' "$1" | head -n1 || true
}

# free_port: prints a loopback port nobody listens on at the moment of the call.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# start_nginx: nginx, 1 worker, not a daemon, every path it writes inside $work, answering
# `return 200 "ok"` on 127.0.0.1:$nginx_port (set here): the ceiling for a plain HTTP answer on
# this machine. Its pid is appended to the caller's `pids` array and its worker's pid (the process
# that answers, for its CPU time) set in nginx_worker; exits 1 when it will not start.
start_nginx() {
  local attempt
  mkdir -p "$work/nginx/tmp"
  for attempt in 1 2 3 4 5; do
    nginx_port="$(free_port)"
    cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path $work/nginx/tmp/body;
  proxy_temp_path $work/nginx/tmp/proxy;
  fastcgi_temp_path $work/nginx/tmp/fastcgi;
  uwsgi_temp_path $work/nginx/tmp/uwsgi;
  scgi_temp_path $work/nginx/tmp/scgi;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { return 200 "ok"; }
  }
}
CONF
    nginx -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" &
    local pid=$!
    for _ in $(seq 100); do
      if [ "$(curl -s "http://127.0.0.1:$nginx_port/" 2>/dev/null)" = "ok" ]; then
        pids+=("$pid")
        nginx_worker="$(pgrep -P "$pid" | head -n1)"
        return
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "$(basename "$0"): nginx did not start:" >&2
  cat "$work/nginx/error.log" >&2
  exit 1
}

# start_etcd DATA_DIR LOG [ETCD OPTION...]: one etcd member on free loopback ports, its data in
# DATA_DIR; sets etcd_pid (the caller stops it) and port (its client port). Exits 1, with the
# log's tail, when it does not answer within 10 s.
start_etcd() {
  local data="$1" log="$2" peer ok=0
  shift 2
  port="$(free_port)" peer="$(free_port)"
  etcd --name bench --data-dir "$data" \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" "$@" >"$log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ok=1; break; fi
    sleep 0.05
  done
  [ "$ok" -eq 1 ] || { echo "etcd did not start:" >&2; tail -20 "$log" >&2; exit 1; }
}

# wrk_figures FILE: "req/s p99_ms failures requests" of one wrk run (its --latency output):
# failures are non-2xx/3xx answers and socket errors.
wrk_figures() {
  awk '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /m$/)  { sub(/m$/, "", v);  return v * 60000 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return v + 0
    }
    /^Requests\/sec:/ { rps = $2 }
    / requests in / { n = $1 }
    $1 == "99%" { p99 = ms($2) }
    /Non-2xx or 3xx responses:/ { bad += $NF }
    /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
    END { printf "%s %s %d %d\n", rps + 0, p99 + 0, bad, n + 0 }' "$1"
}

# children_cpu_us BEFORE AFTER: the CPU time (user + system, in us) of the children this shell
# reaped between two `times >FILE`, each run in the shell itself (a subshell's count starts at 0).
# Taken around the wait for wrk, it is the load generator's own, which shares the cores with the
# server it measures.
children_cpu_us() {
  awk 'FNR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t[FILENAME] += a[1] * 60 + a[2] } }
       END { printf "%.0f\n", (t[ARGV[2]] - t[ARGV[1]]) * 1e6 }' "$1" "$2"
}

# --- A PostgreSQL server of the benchmark's own (pg_bench.sh, scale_bench.sh). These use the
# caller's $work, $pgdata and $pg_bin, and set $pg_port and $pg_pid.

# as_pg CMD...: runs CMD as the postgres user when root (PostgreSQL refuses to run as root);
# setpriv execs in place, so a background pid is the server's own.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    if command -v setpriv >/dev/null; then
      setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
      runuser -u postgres -- "$@"
    fi
  else
    "$@"
  fi
}

# stop_pids PID...: SIGTERM to each, then waits for each; a PID already gone is no error.
stop_pids() {
  local p
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

# on_exit COMMAND: runs COMMAND when the script (or subshell) exits, also after Ctrl-C or a
# SIGTERM, which end it with 130 or 143.
on_exit() {
  trap "$1" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# stop_postgres: a fast shutdown of $pg_pid (rolls back open transactions, checkpoints, exits),
# killed after 60 s; nothing when none runs.
stop_postgres() {
  [ -n "${pg_pid:-}" ] || return 0
  as_pg timeout 90 "$pg_bin/pg_ctl" -D "$pgdata" stop -m fast -t 60 >/dev/null 2>&1 || kill -INT "$pg_pid" 2>/dev/null || true
  local _
  for _ in $(seq 600); do kill -0 "$pg_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pg_pid" 2>/dev/null || true
  wait "$pg_pid" 2>/dev/null || true
  pg_pid=""
}

# start_postgres WHO [-c NAME=VALUE...]: a fresh cluster in $work/pg (owned by the postgres user
# when root) on a free loopback port, fsync, synchronous_commit and full_page_writes on, plus the
# settings given; exits saying why (WHO: the script's name) when it does not start.
# wal_init_zero off: a fresh cluster has no WAL segments to recycle, and zero-filling each new
# 16 MB segment held up the commits waiting on it by 100-350 ms, once a second at fenced's WAL
# rate (docs/benchmarks.md); a server that has run a while recycles its segments instead.
start_postgres() {
  local who="$1" attempt _
  shift
  rm -rf "$work/pg"
  mkdir -p "$work/pg"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "$who: running as root but there is no postgres user (install postgresql-15)" >&2; exit 1; }
    chmod 0711 "$work"  # the server user must reach its folder through the temp folder
    chown postgres: "$work/pg"
  fi
  if ! as_pg timeout 120 "$pg_bin/initdb" --auth=trust --username=postgres --encoding=UTF8 --locale=C.UTF-8 \
      --no-instructions -D "$pgdata" >"$work/initdb.log" 2>&1; then
    echo "$who: initdb failed:" >&2
    cat "$work/initdb.log" >&2
    exit 1
  fi
  local settings=(
    -c listen_addresses=127.0.0.1 -c "unix_socket_directories=$work/pg"
    -c fsync=on -c synchronous_commit=on -c full_page_writes=on
    -c max_connections=300 -c shared_buffers=256MB -c max_wal_size=4GB -c wal_init_zero=off "$@"
  )
  for attempt in 1 2 3 4 5; do
    pg_port="$(free_port)"
    as_pg "$pg_bin/postgres" -D "$pgdata" -p "$pg_port" "${settings[@]}" >"$work/pg/server.log" 2>&1 &
    pg_pid=$!
    for _ in $(seq 300); do
      kill -0 "$pg_pid" 2>/dev/null || break
      timeout 10 "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    if kill -0 "$pg_pid" 2>/dev/null; then
      echo "$who: postgres did not accept connections within 30 s:" >&2
      cat "$work/pg/server.log" >&2
      exit 1
    fi
    wait "$pg_pid" 2>/dev/null || true
    pg_pid=""
    if ! grep -q "in use" "$work/pg/server.log" || [ "$attempt" -eq 5 ]; then
      echo "$who: postgres did not start:" >&2
      cat "$work/pg/server.log" >&2
      exit 1
    fi
  done
}
