#!/bin/sh
# The --setup of counter-postgres.py (docs/testing-with-pauses.md, "A Python worker against
# PostgreSQL"), run by `fencectl pause-test` before each run's clients start:
#   - loads the guard into $DATABASE_URL (idempotent: CREATE ... IF NOT EXISTS / OR REPLACE),
#     from $1, else $FENCEKIT_GUARD_SQL, else fencedstore/sql/postgresql-guard.sql of the
#     checkout this script is in;
#   - creates pause_counter if missing;
#   - deletes the run's row ('run-$FENCEKIT_RUN'), so that it starts absent, the checker's
#     initial value: nothing to record.
# It leaves the fences alone: tokens only grow while the lock service lives. A new lock service
# (a new sqlite:// file) starts again from token 1, so give it a new database too, or every
# write is refused as stale.
set -eu
: "${DATABASE_URL:?DATABASE_URL is not set}"
: "${FENCEKIT_RUN:?FENCEKIT_RUN is not set}"
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"  # no "already exists" notices
guard=${1:-${FENCEKIT_GUARD_SQL:-$(dirname "$0")/../../fencedstore/sql/postgresql-guard.sql}}
psql -X -q -At -v ON_ERROR_STOP=1 -d "$DATABASE_URL" -f "$guard"
psql -X -q -At -v ON_ERROR_STOP=1 -v key="run-$FENCEKIT_RUN" -d "$DATABASE_URL" <<'SQL'
CREATE TABLE IF NOT EXISTS pause_counter (key text PRIMARY KEY, value bigint);
DELETE FROM pause_counter WHERE key = :'key';
SQL
