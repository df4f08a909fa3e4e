#!/usr/bin/env bash
# The MariaDB guard's cost: N guarded writes (START TRANSACTION; CALL fencekit_advance; UPDATE;
# COMMIT) against the same N unguarded writes (START TRANSACTION; UPDATE; COMMIT), on one
# MariaDB server this script starts itself (mariadb-install-db in a temp dir, as the mysql user
# when root, a free loopback port, its socket in the temp dir, innodb_flush_log_at_trx_commit=1:
# every commit is durable), in one run: ROUNDS rounds, the arms' order alternated each round,
# medians of writes/s printed, and the ratio of the guarded time to the unguarded one. A first
# round (both arms, not counted) warms the server up.
# Each arm is one `mariadb` client reading its N transactions from a file: one connection, one
# holder whose token grows by one on every write (so every write really advances the fence),
# keys cycling over 1,000 rows. Loopback only; the server is stopped on exit, also on failure.
#
# Usage: bench/guard_mariadb_bench.sh [N writes per arm and round, default 2000] [rounds, default 3]
#   FLUSH_AT_COMMIT=2   innodb_flush_log_at_trx_commit (default 1, durable): 2 takes the fsync
#                       out of each commit, leaving the statements' own cost
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port
n="${1:-2000}"
rounds="${2:-3}"
for b in /usr/sbin/mariadbd mariadb-install-db mariadb; do
  command -v "$b" >/dev/null || { echo "guard_mariadb_bench: no $b; install mariadb-server mariadb-client" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/fencekit-mariadb-bench.XXXXXX")"
data="$work/data"
server_pid=""
as_mysql() {
  if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=mysql --regid=mysql --init-groups -- "$@"; else "$@"; fi
}
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$data"
if [ "$(id -u)" -eq 0 ]; then
  chmod 0711 "$work"  # the server user must reach its folder through the temp folder
  chown mysql: "$data"
fi
if ! as_mysql mariadb-install-db --no-defaults --datadir="$data" \
    --auth-root-authentication-method=normal --skip-test-db >"$work/install.log" 2>&1; then
  echo "guard_mariadb_bench: mariadb-install-db failed:" >&2
  cat "$work/install.log" >&2
  exit 1
fi
cat >"$work/init.sql" <<'SQL'
CREATE USER IF NOT EXISTS 'bench'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'bench'@'127.0.0.1';
SQL
chmod 0644 "$work/init.sql"
for attempt in 1 2 3 4 5; do
  port="$(free_port)"
  : >"$work/server.log"
  # Not through as_mysql: a function in the background is a subshell, whose pid is not the
  # server's; setpriv execs in place, so $! is the server's own.
  server=(/usr/sbin/mariadbd)
  [ "$(id -u)" -eq 0 ] && server=(setpriv --reuid=mysql --regid=mysql --init-groups -- /usr/sbin/mariadbd)
  "${server[@]}" --no-defaults --datadir="$data" --port="$port" \
    --bind-address=127.0.0.1 --socket="$data/mariadbd.sock" --skip-name-resolve \
    --init-file="$work/init.sql" --innodb-flush-log-at-trx-commit="${FLUSH_AT_COMMIT:-1}" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    kill -0 "$server_pid" 2>/dev/null || break
    grep -q "ready for connections" "$work/server.log" && break 2
    sleep 0.1
  done
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
[ -n "$server_pid" ] || { echo "guard_mariadb_bench: mariadbd did not start:" >&2; tail -20 "$work/server.log" >&2; exit 1; }
client=(mariadb --no-defaults -h 127.0.0.1 -P "$port" -u bench)

"${client[@]}" -e "CREATE DATABASE bench"
"${client[@]}" bench <"$root/fencedstore/sql/mariadb-guard.sql"
"${client[@]}" bench -e "CREATE TABLE rows_ (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB;
  INSERT INTO rows_ SELECT seq, 0 FROM seq_0_to_999;"

# write_file ARM ROUND: the arm's N transactions; the guarded arm's tokens continue from the
# previous round's.
write_file() {
  local arm="$1" round="$2"
  awk -v n="$n" -v arm="$arm" -v base="$((round * n))" 'BEGIN {
    for (i = 1; i <= n; i++) {
      print "START TRANSACTION;"
      if (arm == "guarded") print "CALL fencekit_advance(\x27bench\x27, " base + i ");"
      print "UPDATE rows_ SET v = v + 1 WHERE id = " i % 1000 ";"
      print "COMMIT;"
    }
  }' >"$work/$arm.sql"
}
# run_arm ARM ROUND: prints the arm's writes/s.
run_arm() {
  local arm="$1" round="$2" t0 t1
  write_file "$arm" "$round"
  t0=$(date +%s%N)
  "${client[@]}" bench <"$work/$arm.sql"
  t1=$(date +%s%N)
  awk -v n="$n" -v ns="$((t1 - t0))" 'BEGIN { printf "%.1f\n", n / (ns / 1e9) }'
}

: >"$work/guarded.rates"
: >"$work/unguarded.rates"
for round in $(seq 0 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="unguarded guarded"; else order="guarded unguarded"; fi
  for arm in $order; do
    rate="$(run_arm "$arm" "$round")"
    if [ "$round" -eq 0 ]; then
      echo "warm-up $arm: $rate writes/s" >&2
    else
      echo "$rate" >>"$work/$arm.rates"
      echo "round $round $arm: $rate writes/s" >&2
    fi
  done
done
expected=$((n * (rounds + 1)))
got="$("${client[@]}" -N bench -e "SELECT SUM(v) FROM rows_")"
[ "$got" -eq $((2 * expected)) ] || { echo "guard_mariadb_bench: $got updates applied, expected $((2 * expected))" >&2; exit 1; }
highest="$("${client[@]}" -N bench -e "SELECT highest FROM fencekit_fences WHERE lock_name = 'bench'")"
[ "$highest" -eq "$expected" ] || { echo "guard_mariadb_bench: the fence is $highest, expected $expected" >&2; exit 1; }
g="$(median <"$work/guarded.rates")"
u="$(median <"$work/unguarded.rates")"
echo "mariadb $(/usr/sbin/mariadbd --version | awk '{print $3}'), innodb_flush_log_at_trx_commit=${FLUSH_AT_COMMIT:-1}, $n writes x $rounds rounds per arm, medians:"
echo "  unguarded (UPDATE, COMMIT):                       $u writes/s"
echo "  guarded (CALL fencekit_advance, UPDATE, COMMIT):  $g writes/s"
awk -v g="$g" -v u="$u" 'BEGIN { printf "  guarded time / unguarded time: %.2f\n", u / g }'
