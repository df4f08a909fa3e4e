#!/bin/sh
# A `fencectl pause-test --worker` example: one increment of a counter kept in fenced, with
# curl. docs/testing-with-pauses.md ("A shell worker with curl against fenced") shows how to run
# it, with fencing and against a `fenced --no-fencing` (the control arm: this script unchanged).
#
# Environment:
#   FENCED_URL        the store, e.g. http://127.0.0.1:8080 (required)
#   FENCING_LOCK, FENCING_TOKEN     set by pause-test from the lease it holds
#   FENCING_SERVICE   sent as Fencing-Service when set (fencectl run sets it)
#   FENCEKIT_RUN      the run number: the key is pause-test/$FENCEKIT_RUN/counter (fresh per run,
#                     so no --setup is needed: absent, the checker's initial value)
#   FENCEKIT_HISTORY  the JSON-lines file this worker appends its one `cas` line to
#   FENCED_MAX_TIME   curl's --max-time per request, seconds (default 5)
#   WORK_SECONDS      how long the worker "works" between its read and its write (default 0)
#   FENCEKIT_PROXY_STORE  set by `pause-test --proxy store=HOST:PORT`: this client's proxy in
#                     front of fenced (HOST:PORT, FENCED_URL's), which the kit may hold; the
#                     requests go there
#
# One invocation: claim, read, write counter + 1, record one line:
#   {"op":"cas","key":K,"from":READ,"value":READ+1,"start_us":..,"end_us":..,"outcome":..}
# from is null when the counter was absent (404). outcome: ok on 2xx; fail when fenced refused
# the write (409 stale_token, or another 4xx: nothing written); unknown when curl got no answer
# (connection lost, --max-time) or a 5xx: the write may have taken effect.
# When the claim or the read does not succeed, the counter was not written: nothing is
# recorded. The exit code is 0 whenever the worker did its job (a refusal included), 2 when the
# environment is incomplete.
set -u

for v in FENCED_URL FENCING_LOCK FENCING_TOKEN FENCEKIT_RUN FENCEKIT_HISTORY; do
  eval "val=\${$v:-}"
  if [ -z "$val" ]; then
    echo "counter-curl.sh: $v is not set" >&2
    exit 2
  fi
done

base=${FENCED_URL%/}/v1/objects/pause-test/$FENCEKIT_RUN
if [ -n "${FENCEKIT_PROXY_STORE:-}" ]; then
  base=http://$FENCEKIT_PROXY_STORE/v1/objects/pause-test/$FENCEKIT_RUN
fi
max_time=${FENCED_MAX_TIME:-5}
now_us() { date +%s%6N; }

# put KEY VALUE: a fenced write; prints "<http status>\n<body>", status 000 when no answer.
put() {
  : > "$body_file"
  curl -sS --max-time "$max_time" -X PUT -o "$body_file" -w '%{http_code}' \
    -H "Fencing-Token: $FENCING_TOKEN" -H "Fencing-Lock: $FENCING_LOCK" \
    ${FENCING_SERVICE:+-H "Fencing-Service: $FENCING_SERVICE"} \
    --data-binary "$2" "$base/$1"
}

body_file=$(mktemp) || exit 1
trap 'rm -f "$body_file"' EXIT

# The claim: a fenced write of another key under the same lock, before the read. It raises the
# lock's fence to this token first. Without it, a write's token alone does not stop a lost
# update: A (token 5) reads 10 and is paused past its lease; B (token 6) reads 10; A wakes and
# writes 11 with token 5, accepted since the fence is still 5; B writes 11 with token 6, also
# accepted. With the claim, B's token is on the fence before B reads, so A's late write is
# refused (409 stale_token). docs/testing-with-pauses.md, "Why the claim".
code=$(put claim "${FENCING_OWNER:-}-$FENCING_TOKEN" 2>/dev/null) || code=000
case $code in
  2??) ;;
  *) echo "counter-curl.sh: the claim got $code, token $FENCING_TOKEN: not incrementing" >&2
     exit 0 ;;
esac

# The read: 200 with the value, 404 when absent.
start=$(now_us)
code=$(curl -sS --max-time "$max_time" -o "$body_file" -w '%{http_code}' "$base/counter" \
  2>/dev/null) || code=000
case $code in
  200) from=$(cat "$body_file") ;;
  404) from=null ;;
  *) echo "counter-curl.sh: reading the counter got $code: not incrementing" >&2
     exit 0 ;;
esac
case $from in
  null) value=1 ;;
  ''|*[!0-9]*) echo "counter-curl.sh: the counter holds '$from', not a number" >&2
     exit 1 ;;
  *) value=$((from + 1)) ;;
esac

sleep "${WORK_SECONDS:-0}"  # what a real worker does meanwhile

# The write, with the token.
code=$(put counter "$value" 2>/dev/null) || code=000
end=$(now_us)
case $code in
  2??) outcome=ok ;;
  4??) outcome=fail ;;   # refused, nothing written: 409 stale_token (a lost lease), wrong_lock...
  *) outcome=unknown ;; # 000 (no answer, timed out) or 5xx: it may have been written
esac
[ "$outcome" = ok ] || echo "counter-curl.sh: the write of $value got $code ($outcome)" \
  "$(cat "$body_file")" >&2

# One line, one write(2) on a file opened for appending.
printf '{"op":"cas","key":"pause-test/%s/counter","from":%s,"value":%s,"start_us":%s,"end_us":%s,"outcome":"%s"}\n' \
  "$FENCEKIT_RUN" "$from" "$value" "$start" "$end" "$outcome" >> "$FENCEKIT_HISTORY"
exit 0
