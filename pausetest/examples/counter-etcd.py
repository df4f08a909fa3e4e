#!/usr/bin/env python3
"""A `fencectl pause-test --worker` example: one increment of a counter kept in etcd.

It talks to etcd's v3 JSON gateway (POST /v3/kv/range, /v3/kv/txn, /v3/kv/put and
/v3/kv/deleterange; keys and values in base64) with the standard library only, and guards its
write with the transaction of docs/guard-in-your-database.md ("etcd"), as EtcdGuard does: the
fence key holds the highest token as 20 zero-padded digits. docs/testing-with-pauses.md
("A Python worker against etcd") shows how to run it, with the guard and without it
(FENCING=off, the control arm).

Environment:
  ETCD_ENDPOINT     the gateway of one member, e.g. http://127.0.0.1:2379 (required)
  FENCING_LOCK, FENCING_TOKEN   set by pause-test from the lease it holds
  FENCEKIT_RUN      the run number: the counter is <LOCK>/pause-counter/run-N, the fence
                    <LOCK>/fence
  FENCEKIT_HISTORY  the JSON-lines file this worker appends its one `cas` line to
  FENCING=off       the control arm: no claim, and the write is a plain put
  WORK_SECONDS      how long the worker "works" between its read and its write (default 0;
                    the test sets 2: docs/testing-with-pauses.md says why)
  ETCD_TIMEOUT      seconds one request may take (default 5)

One invocation is three requests:
  1. the claim, a txn: when the fence holds a higher token, only read it (refused: the worker
     stops, nothing recorded); else put the fence to this token. It comes before the read, so
     that a paused holder's late write (3, with an older token) is refused once a newer holder
     has read;
  2. the read (range; absent: null);
  3. the guarded write, a txn: the same compare, else put the fence and the counter (the value
     read + 1, computed here: a lost update is then two `ok` cas lines from the same value).
It appends one line:
  {"op":"cas","key":K,"from":READ,"value":READ+1,"start_us":..,"end_us":..,"outcome":..}
outcome: ok when the write was acknowledged; fail when the guard refused it (the txn's compare
held: nothing written); unknown when there was no answer (connection, timeout, an HTTP error).
When the claim or the read does not succeed, nothing was written and nothing is recorded. Exit
code: 0 when the worker did its job (a refusal included), 2 when the environment is incomplete.

`counter-etcd.py --setup` is the --setup: it deletes the run's counter, so it starts absent. It
leaves the fence alone: tokens only grow while the lock service lives; a new lock service starts
again from token 1, so give it a new etcd (or delete the fence), or every write is refused.
"""

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request


# Straight to the endpoint: no http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class NoAnswer(Exception):
    """The request got no usable reply: it may or may not have taken effect."""


def b64(text):
    return base64.b64encode(text.encode()).decode()


def now_us():
    return time.time_ns() // 1000


def call(path, body):
    """POSTs `body` to the gateway's `path`; the reply as a dict, or NoAnswer."""
    url = os.environ["ETCD_ENDPOINT"].rstrip("/") + path
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(request, timeout=float(os.environ.get("ETCD_TIMEOUT", "5"))) as r:
            return json.loads(r.read())
    except (OSError, ValueError) as e:  # URLError, HTTPError, timeouts, a reply not JSON
        raise NoAnswer(str(e)) from e


def fence_value(token):
    """The fence's value: 20 digits, zero-padded, so that etcd's byte-wise order is numeric."""
    return "%020d" % token


def guarded(fence, token, puts):
    """The guard's txn: refused (True) when the fence holds a higher token, and then nothing is
    written; otherwise (False) the fence is put to `token` and each (key, value) of `puts`."""
    padded = b64(fence_value(token))
    reply = call("/v3/kv/txn", {
        # A value compare on a missing key is false: a new fence takes the writing branch. The
        # refusing branch is empty (etcd would log it with every write, taken or not).
        "compare": [{"key": b64(fence), "target": "VALUE", "result": "GREATER",
                     "value": padded}],
        "failure": [{"request_put": {"key": b64(fence), "value": padded}}] +
                   [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in puts],
    })
    if "header" not in reply:
        raise NoAnswer("unexpected reply " + json.dumps(reply))
    return reply.get("succeeded", False) is True  # the gateway leaves out a false


def read(key):
    """The counter's value as text; None when absent."""
    reply = call("/v3/kv/range", {"key": b64(key)})
    if "header" not in reply:
        raise NoAnswer("unexpected reply " + json.dumps(reply))
    kvs = reply.get("kvs") or []
    return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None


def main():
    setup = sys.argv[1:] == ["--setup"]
    needed = ["ETCD_ENDPOINT", "FENCING_LOCK", "FENCEKIT_RUN"]
    if not setup:
        needed += ["FENCING_TOKEN", "FENCEKIT_HISTORY"]
    for name in needed:
        if not os.environ.get(name):
            print(f"counter-etcd.py: {name} is not set", file=sys.stderr)
            return 2
    lock = os.environ["FENCING_LOCK"]
    fence = lock + "/fence"
    key = lock + "/pause-counter/run-" + os.environ["FENCEKIT_RUN"]
    if setup:
        try:
            call("/v3/kv/deleterange", {"key": b64(key)})
        except NoAnswer as e:
            print(f"counter-etcd.py: deleting {key}: {e}", file=sys.stderr)
            return 1
        return 0
    token_text = os.environ["FENCING_TOKEN"]
    if not token_text.isdigit() or int(token_text) < 1:
        print(f"counter-etcd.py: FENCING_TOKEN={token_text!r} is not a token", file=sys.stderr)
        return 2
    token = int(token_text)
    fencing = os.environ.get("FENCING") != "off"

    # The claim.
    if fencing:
        try:
            if guarded(fence, token, []):
                print(f"counter-etcd.py: the claim was refused, token {token}: not incrementing",
                      file=sys.stderr)
                return 0
        except NoAnswer as e:
            print(f"counter-etcd.py: the claim failed, token {token}: not incrementing: {e}",
                  file=sys.stderr)
            return 0

    # The read.
    start = now_us()
    try:
        current = read(key)
    except NoAnswer as e:
        print(f"counter-etcd.py: the read failed: not incrementing: {e}", file=sys.stderr)
        return 0
    if current is None:
        value_from, value = None, 1
    elif current.isdigit():
        value_from, value = int(current), int(current) + 1
    else:
        print(f"counter-etcd.py: the counter holds {current!r}, not a number", file=sys.stderr)
        return 1

    time.sleep(float(os.environ.get("WORK_SECONDS", "0")))  # what a real worker does meanwhile

    # The write: guarded, or a plain put in the control arm.
    try:
        if not fencing:
            reply = call("/v3/kv/put", {"key": b64(key), "value": b64(str(value))})
            if "header" not in reply:
                raise NoAnswer("unexpected reply " + json.dumps(reply))
            outcome = "ok"
        else:
            outcome = "fail" if guarded(fence, token, [(key, str(value))]) else "ok"
    except NoAnswer as e:
        print(f"counter-etcd.py: the write of {value} (unknown): {e}", file=sys.stderr)
        outcome = "unknown"
    end = now_us()
    if outcome == "fail":
        print(f"counter-etcd.py: the write of {value} was refused, token {token}",
              file=sys.stderr)

    line = json.dumps({"op": "cas", "key": key, "from": value_from, "value": value,
                       "start_us": start, "end_us": end, "outcome": outcome},
                      separators=(",", ":")) + "\n"
    # One write(2) on a file opened for appending: lines of concurrent clients never mix.
    fd = os.open(os.environ["FENCEKIT_HISTORY"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
