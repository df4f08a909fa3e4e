#!/usr/bin/env bash
# The MariaDB guard's cost: the same N writes (START TRANSACTION; UPDATE; COMMIT) unguarded and
# guarded in each form, on one MariaDB server this script starts itself (mariadb-install-db in
# a temp dir, as the mysql user when root, a free loopback port, its socket in the temp dir,
# innodb_flush_log_at_trx_commit=1: every commit is durable; no binary log, for every arm), in
# one run. The arms:
#   unguarded   START TRANSACTION; UPDATE; COMMIT                        3 round trips
#   call        START TRANSACTION; CALL fencekit_advance; UPDATE; COMMIT  4
#   statement   START TRANSACTION; INSERT INTO fencekit_fences ... ON DUPLICATE KEY UPDATE;
#               UPDATE; COMMIT                                            4
#   with-begin  START TRANSACTION and the statement sent as one multi-statement query, then
#               UPDATE; COMMIT: 3 round trips, the unguarded arm's
#   with-write  START TRANSACTION; the statement and the UPDATE as one query; COMMIT: 3
#   before      (only with BEFORE_SQL) CALL fencekit_advance of an older guard file, loaded in a
#               database of its own, e.g. the procedure before the triggers:
#                 git show d725c9c:fencedstore/sql/mariadb-guard.sql >/tmp/before.sql
# One `mariadb` client (one connection) runs every arm, taking turns in blocks of B writes: a first
# cycle (every arm once, not counted) warms the server up, then CYCLES cycles, the arms' order
# rotated each cycle; a `SELECT UNIX_TIMESTAMP(NOW(6))` between blocks times them. The arms share
# the machine's load moment by moment (on this shared machine, separate timed runs of each arm
# varied by 4x from run to run). Printed per arm: writes/s, and its time over the unguarded arm's:
# of the totals (moved by a stall of a single block), and the median of each cycle's own ratio (the
# figure to read). Each arm's lock is its own, its token grows by one on every write (so every write
# really advances the fence); keys cycle over 1,000 rows, the same in every arm. The script checks
# that every update landed and each fence ends at its last token. Loopback only; the server is
# stopped on exit, also on failure.
#
# Usage: bench/guard_mariadb_bench.sh [B writes per block, default 50] [CYCLES, default 100]
#   FLUSH_AT_COMMIT=2   innodb_flush_log_at_trx_commit (default 1, durable): 2 takes the fsync
#                       out of each commit, leaving the statements' and round trips' own cost
#   BEFORE_SQL=FILE     adds the "before" arm (above)
#   EXPLAIN=1           adds arms that split the cost, each before the same UPDATE in its own
#                       round trip: no-op (DO 0: the round trip alone), other-row (an UPDATE of
#                       a row of another table: one more modified row), no-trigger (the upsert
#                       on a copy of the fence table without triggers, GREATEST in place of the
#                       check), same-token (the statement repeating one token: no row change);
#                       and in with-write's form (the fence statement and the UPDATE as one
#                       query): update-write (an UPDATE of a fence row made beforehand, checked
#                       by the trigger: no insert attempt), bare-write (the trigger-less upsert);
#                       and one-unguarded / one-guarded (the whole transaction as one query,
#                       without and with the statement: the guard's cost with no round trip to
#                       dilute it; compare the two with each other)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/bench/lib.sh"  # median, free_port, stop_pids, on_exit
block="${1:-50}"
cycles="${2:-100}"
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
  stop_pids ${server_pid:+"$server_pid"}
  rm -rf "$work"
}
on_exit cleanup

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

arms=(unguarded call statement with-begin with-write)
if [ -n "${EXPLAIN:-}" ]; then
  # Where the guard's time goes: a copy of the fence table without triggers, and a row of
  # another table to write.
  "${client[@]}" bench -e "CREATE TABLE fences_bare (lock_name VARBINARY(255) NOT NULL PRIMARY KEY,
    highest BIGINT NOT NULL) ENGINE=InnoDB; CREATE TABLE other (id INT PRIMARY KEY, v BIGINT NOT NULL)
    ENGINE=InnoDB; INSERT INTO other VALUES (1, 0);
    INSERT INTO fencekit_fences VALUES ('update-write', 1);"
  arms+=(no-op other-row no-trigger same-token update-write bare-write one-unguarded one-guarded)
fi
if [ -n "${BEFORE_SQL:-}" ]; then
  "${client[@]}" -e "CREATE DATABASE before_"
  "${client[@]}" before_ <"$BEFORE_SQL"
  arms+=(before)
fi

# One file, one client, one connection: CYCLES cycles, in each a block of B transactions of every
# arm, the arms' order rotated each cycle; before each block a `SELECT arm, UNIX_TIMESTAMP(NOW(6))`
# marks when the previous block ended. A block's time runs from its mark to the next one: its B
# transactions and one mark's round trip, the same for every arm. The arms take turns every few
# milliseconds, so the load of this shared machine falls on all of them alike.
awk -v cycles="$((cycles + 1))" -v b="$block" -v arms="${arms[*]}" 'BEGIN {
  q = "\x27"
  k = split(arms, arm, " ")
  for (c = 0; c < cycles; c++) {
    for (j = 0; j < k; j++) {
      a = arm[(c + j) % k + 1]
      print "SELECT " q (c == 0 ? "warm-up" : a) q ", UNIX_TIMESTAMP(NOW(6));"
      for (i = 0; i < b; i++) {
        t = ++token[a]
        write = "UPDATE rows_ SET v = v + 1 WHERE id = " (c * b + i) % 1000 ";"
        advance = "INSERT INTO fencekit_fences (lock_name, highest) VALUES (" q a q ", " t ") ON DUPLICATE KEY UPDATE highest = VALUES(highest);"
        bare = "INSERT INTO fences_bare VALUES (" q a q ", " t ") ON DUPLICATE KEY UPDATE highest = GREATEST(highest, VALUES(highest));"
        # The client sends everything up to the delimiter as one query.
        if (a == "one-unguarded" || a == "one-guarded") {
          print "DELIMITER $$"; print "START TRANSACTION; " (a == "one-guarded" ? advance " " : "") write " COMMIT$$"; print "DELIMITER ;"
          continue
        }
        if (a == "with-begin") { print "DELIMITER $$"; print "START TRANSACTION; " advance "$$"; print "DELIMITER ;"; print write }
        else print "START TRANSACTION;"
        if (a == "unguarded") print write
        if (a == "call") { print "CALL fencekit_advance(" q a q ", " t ");"; print write }
        if (a == "statement") { print advance; print write }
        if (a == "with-write") { print "DELIMITER $$"; print advance " " write "$$"; print "DELIMITER ;" }
        if (a == "no-op") { print "DO 0;"; print write }
        if (a == "other-row") { print "UPDATE other SET v = " t " WHERE id = 1;"; print write }
        if (a == "no-trigger") { print bare; print write }
        if (a == "update-write") { print "DELIMITER $$"; print "UPDATE fencekit_fences SET highest = " t " WHERE lock_name = " q a q "; " write "$$"; print "DELIMITER ;" }
        if (a == "bare-write") { print "DELIMITER $$"; print bare " " write "$$"; print "DELIMITER ;" }
        if (a == "same-token") { print "INSERT INTO fencekit_fences (lock_name, highest) VALUES (" q a q ", 1) ON DUPLICATE KEY UPDATE highest = VALUES(highest);"; print write }
        if (a == "before") { print "CALL before_.fencekit_advance(" q a q ", " t ");"; print write }
        print "COMMIT;"
      }
    }
  }
  print "SELECT " q "end" q ", UNIX_TIMESTAMP(NOW(6));"
}' >"$work/run.sql"
"${client[@]}" -N --batch bench <"$work/run.sql" >"$work/marks"

# Per block: arm, cycle, seconds.
awk -F'\t' -v k="${#arms[@]}" '
  NR > 1 && prev != "warm-up" { printf "%s %d %.6f\n", prev, int((NR - 2) / k), $2 - t }
  { prev = $1; t = $2 }' "$work/marks" >"$work/blocks"
[ "$(wc -l <"$work/blocks")" -eq $((cycles * ${#arms[@]})) ] || { echo "guard_mariadb_bench: marks missing" >&2; exit 1; }
per_arm=$(((cycles + 1) * block))
got="$("${client[@]}" -N bench -e "SELECT SUM(v) FROM rows_")"
[ "$got" -eq $((${#arms[@]} * per_arm)) ] || { echo "guard_mariadb_bench: $got updates applied, expected $((${#arms[@]} * per_arm))" >&2; exit 1; }
for arm in "${arms[@]}"; do
  case "$arm" in unguarded | no-op | other-row | no-trigger | same-token | bare-write | one-unguarded) continue ;; esac
  db=bench
  [ "$arm" = before ] && db=before_
  highest="$("${client[@]}" -N "$db" -e "SELECT highest FROM fencekit_fences WHERE lock_name = '$arm'")"
  [ "$highest" = "$per_arm" ] || { echo "guard_mariadb_bench: the $arm fence is $highest, expected $per_arm" >&2; exit 1; }
done

echo "mariadb $(/usr/sbin/mariadbd --version | awk '{print $3}'), innodb_flush_log_at_trx_commit=${FLUSH_AT_COMMIT:-1}, $cycles cycles of $block writes per arm, load average $(cut -d' ' -f1-3 /proc/loadavg):"
for arm in "${arms[@]}"; do
  total="$(awk -v a="$arm" '$1 == a { s += $3 } END { printf "%.6f", s }' "$work/blocks")"
  # Each cycle's own ratio: the arm's block time over the unguarded block's in the same cycle.
  ratio="$(awk -v a="$arm" '$1 == "unguarded" { u[$2] = $3 } $1 == a { m[$2] = $3 }
    END { for (c in m) printf "%.6f\n", m[c] / u[c] }' "$work/blocks" | median)"
  awk -v arm="$arm" -v total="$total" -v n="$((cycles * block))" -v ratio="$ratio" \
    -v utotal="$(awk '$1 == "unguarded" { s += $3 } END { printf "%.6f", s }' "$work/blocks")" 'BEGIN {
      printf "  %-10s %8.1f writes/s   time / unguarded: %.2f of the totals, %.2f median per cycle%s\n", arm,
             n / total, total / utotal, ratio,
             (arm !~ /^(call|statement|with-begin|with-write)$/ ? "" : sprintf(" (target <= 1.2x: %s)", ratio <= 1.2 ? "met" : "not met")) }'
done
