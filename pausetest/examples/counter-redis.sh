#!/bin/sh
# A `fencectl pause-test --worker` example: one increment of a counter kept in Redis, with
# redis-cli and the guard of fencedstore/lua/fencekit.lua (docs/guard-in-your-database.md,
# "Redis"). docs/testing-with-pauses.md ("A shell worker against Redis") shows how to run it,
# with the guard and without it (FENCING=off, the control arm).
#
# Environment:
#   REDIS_URL         the server, e.g. redis://127.0.0.1:6379 (required); the library is loaded
#                     in it: `counter-redis.sh --setup`, given as pause-test's --setup, loads it
#   FENCING_LOCK, FENCING_TOKEN     set by pause-test from the lease it holds
#   FENCEKIT_RUN      the run number: the counter is {LOCK}pause-counter/run-N, the fence
#                     {LOCK}fence and its service {LOCK}service (one hash tag: one slot in a
#                     cluster)
#   FENCEKIT_HISTORY  the JSON-lines file this worker appends its one `cas` line to
#   FENCING_SERVICE   set by pause-test: the lock service's id. The claim binds the lock's fence
#                     to the first service that claims it ({LOCK}service, SET NX) and refuses a
#                     lease of another: tokens of two services are not comparable (a lock
#                     service restarted empty grants again tokens it granted before)
#   FENCING=token     the token check without the service's: the control arm for a lock service
#                     that forgets its grants (pause-test --restart-locks)
#   FENCING=off       the control arm: the claim is skipped and the write is a plain SET
#   WORK_SECONDS      how long the worker "works" between its read and its write (default 0)
#   REDIS_TIMEOUT     seconds a redis-cli call may take (default 5)
#
# One invocation: the claim (FCALL fencekit_advance: the fence goes up to this token before the
# read, so a paused holder's late write with an older token is refused), the read (GET), then
# FCALL fencekit_set with the value read + 1, computed here (a lost update is then two `ok` cas
# lines from the same value). It appends one line:
#   {"op":"cas","key":K,"from":READ,"value":READ+1,"start_us":..,"end_us":..,"outcome":..}
# from is null when the counter was absent. outcome: ok when the write was acknowledged; fail
# when the guard refused it (a FENCE error: nothing written); unknown when there was no answer
# (connection lost, timeout) or another error. When the claim or the read does not succeed,
# nothing was written and nothing is recorded. Exit code: 0 when the worker did its job (a
# refusal included), 2 when the environment is incomplete.
#
# `counter-redis.sh --setup [LIBRARY]` is the --setup: it loads the library (FUNCTION LOAD
# REPLACE; the file is LIBRARY, else $FENCEKIT_GUARD_LUA, else fencedstore/lua/fencekit.lua of
# this checkout) and deletes the run's counter, so it starts absent. It leaves the fence alone:
# tokens only grow while the lock service lives; a new lock service starts again from token 1,
# so give it a new Redis (or delete the fence), or every write is refused as stale.
set -u

cli() { timeout "${REDIS_TIMEOUT:-5}" redis-cli -e -u "$REDIS_URL" "$@"; }

if [ "${1:-}" = --setup ]; then
  set -e
  : "${REDIS_URL:?REDIS_URL is not set}" "${FENCING_LOCK:?FENCING_LOCK is not set}"
  : "${FENCEKIT_RUN:?FENCEKIT_RUN is not set}"
  lib=${2:-${FENCEKIT_GUARD_LUA:-$(dirname "$0")/../../fencedstore/lua/fencekit.lua}}
  cli -x FUNCTION LOAD REPLACE < "$lib" > /dev/null
  cli DEL "{$FENCING_LOCK}pause-counter/run-$FENCEKIT_RUN" > /dev/null
  exit 0
fi

for v in REDIS_URL FENCING_LOCK FENCING_TOKEN FENCEKIT_RUN FENCEKIT_HISTORY; do
  eval "val=\${$v:-}"
  if [ -z "$val" ]; then
    echo "counter-redis.sh: $v is not set" >&2
    exit 2
  fi
done

fence="{$FENCING_LOCK}fence"
key="{$FENCING_LOCK}pause-counter/run-$FENCEKIT_RUN"
now_us() { date +%s%6N; }
err_file=$(mktemp) || exit 1
trap 'rm -f "$err_file"' EXIT

# The claim: the fence's service first (bound once, never changed, so a check that passed
# stays true until the write), then the token.
if [ "${FENCING:-}" != off ] && [ "${FENCING:-}" != token ] && [ -n "${FENCING_SERVICE:-}" ]; then
  if ! bound=$(cli SET "{$FENCING_LOCK}service" "$FENCING_SERVICE" NX GET 2> "$err_file"); then
    echo "counter-redis.sh: the claim failed, token $FENCING_TOKEN: not incrementing:" \
      "$(cat "$err_file")" >&2
    exit 0
  fi
  if [ -n "$bound" ] && [ "$bound" != "$FENCING_SERVICE" ]; then
    echo "counter-redis.sh: the fence is bound to lock service $bound, not this lease's" \
      "$FENCING_SERVICE: not incrementing" >&2
    exit 0
  fi
fi
if [ "${FENCING:-}" != off ] &&
   ! cli FCALL fencekit_advance 1 "$fence" "$FENCING_TOKEN" > /dev/null 2> "$err_file"; then
  echo "counter-redis.sh: the claim failed, token $FENCING_TOKEN: not incrementing:" \
    "$(cat "$err_file")" >&2
  exit 0
fi

# The read: an empty line when absent (the counter only ever holds a number).
start=$(now_us)
if ! from=$(cli GET "$key" 2> "$err_file"); then
  echo "counter-redis.sh: the read failed: not incrementing: $(cat "$err_file")" >&2
  exit 0
fi
case $from in
  '') from=null value=1 ;;
  *[!0-9]*) echo "counter-redis.sh: the counter holds '$from', not a number" >&2
     exit 1 ;;
  *) value=$((from + 1)) ;;
esac

sleep "${WORK_SECONDS:-0}"  # what a real worker does meanwhile

# The write: guarded, or a plain SET in the control arm.
if [ "${FENCING:-}" = off ]; then
  cli SET "$key" "$value" > /dev/null 2> "$err_file"
else
  cli FCALL fencekit_set 2 "$fence" "$key" "$FENCING_TOKEN" "$value" > /dev/null 2> "$err_file"
fi
code=$?
end=$(now_us)
if [ $code = 0 ]; then
  outcome=ok
elif grep -q '^FENCE ' "$err_file"; then
  outcome=fail     # refused as stale: nothing written
else
  outcome=unknown  # no answer (connection, timeout: exit 124) or another error
fi
[ "$outcome" = ok ] || echo "counter-redis.sh: the write of $value ($outcome):" \
  "$(cat "$err_file")" >&2

# One line, one write(2) on a file opened for appending.
printf '{"op":"cas","key":"%s","from":%s,"value":%s,"start_us":%s,"end_us":%s,"outcome":"%s"}\n' \
  "$key" "$from" "$value" "$start" "$end" "$outcome" >> "$FENCEKIT_HISTORY"
exit 0
