#!/bin/sh
# The --setup of counter-mariadb.py (docs/testing-with-pauses.md, "A Python worker against
# MariaDB"), run by `fencectl pause-test` before each run's clients start:
#   - loads the guard into $MARIADB_DATABASE (idempotent: CREATE TABLE IF NOT EXISTS, CREATE
#     OR REPLACE of its triggers and procedure), from $1, else $FENCEKIT_GUARD_SQL, else
#     fencedstore/sql/mariadb-guard.sql of the checkout this script is in;
#   - creates pause_counter if missing;
#   - deletes the run's row ('run-$FENCEKIT_RUN'), so that it starts absent, the checker's
#     initial value: nothing to record.
# MARIADB_HOST, MARIADB_PORT and MARIADB_USER, when set, say where and as whom. It leaves the
# fences alone: tokens only grow while the lock service lives. A new lock service (a new
# sqlite:// file) starts again from token 1, so give it a new database too, or every write is
# refused as stale.
set -eu
: "${MARIADB_DATABASE:?MARIADB_DATABASE is not set}"
: "${FENCEKIT_RUN:?FENCEKIT_RUN is not set}"
case $FENCEKIT_RUN in *[!0-9]*|'') echo "FENCEKIT_RUN=$FENCEKIT_RUN is not a number" >&2; exit 2;; esac
guard=${1:-${FENCEKIT_GUARD_SQL:-$(dirname "$0")/../../fencedstore/sql/mariadb-guard.sql}}
set -- mariadb --batch
[ -n "${MARIADB_HOST:-}" ] && set -- "$@" -h "$MARIADB_HOST"
[ -n "${MARIADB_PORT:-}" ] && set -- "$@" -P "$MARIADB_PORT"
[ -n "${MARIADB_USER:-}" ] && set -- "$@" -u "$MARIADB_USER"
"$@" "$MARIADB_DATABASE" < "$guard"
"$@" "$MARIADB_DATABASE" <<SQL
CREATE TABLE IF NOT EXISTS pause_counter (counter_key VARBINARY(64) PRIMARY KEY, value BIGINT)
  ENGINE=InnoDB;
DELETE FROM pause_counter WHERE counter_key = 'run-$FENCEKIT_RUN';
SQL
