#!/usr/bin/env python3
"""A `fencectl pause-test --worker` example: one increment of a counter kept in MariaDB.

The MariaDB twin of counter-postgres.py (docs/testing-with-pauses.md, "A Python worker against
MariaDB"): standard library only, through the `mariadb` command-line client, so any client
setup (~/.my.cnf, MYSQL_PWD) works.

Environment:
  MARIADB_DATABASE  the database (required); the guard (fencedstore/sql/mariadb-guard.sql) and
                    the table pause_counter(counter_key varbinary(64) primary key, value bigint)
                    are in it: mariadb-setup.sh, given as --setup, loads and makes them
  MARIADB_HOST, MARIADB_PORT, MARIADB_USER   where and as whom (defaults: the client's own)
  FENCING_LOCK, FENCING_TOKEN   set by pause-test from the lease it holds
  FENCEKIT_RUN      the run number: the row is key 'run-<FENCEKIT_RUN>'
  FENCEKIT_HISTORY  the JSON-lines file this worker appends its one `cas` line to
  FENCING=off       the control arm: the same worker without the token check (both
                    fence advances are skipped)
  WORK_SECONDS      how long the worker "works" between its read and its write (default 0)
  MARIADB_TIMEOUT   seconds a client call may take (default 10); its connection is bounded to 5

One invocation is two transactions, as in counter-postgres.py:
  1. the fence advance, the claim, then the read of the value (absent: null);
  2. the fence advance again, then the value read + 1 is written.
The advance is the guard's plain statement (INSERT INTO fencekit_fences ... ON DUPLICATE KEY
UPDATE highest = VALUES(highest)), the same check as CALL fencekit_advance(lock, token): the
table's trigger refuses a lower token.
The client stops at the first error and closes its connection, which rolls the transaction
back (MariaDB does not abort a transaction on an error: a client that goes on must ROLLBACK).
It appends one line:
  {"op":"cas","key":"run-N","from":READ,"value":READ+1,"start_us":..,"end_us":..,"outcome":..}
outcome: ok when transaction 2 committed; fail when the guard refused it (SQLSTATE 45000,
message FENCE stale token ...: rolled back); unknown when the client got no answer or another error. When
transaction 1 does not succeed (a stale token included), nothing was written and nothing is
recorded. Exit code: 0 when the worker did its job (a refusal included), 2 when the environment
is incomplete.
"""

import json
import os
import re
import subprocess
import sys
import time


def now_us():
    return time.time_ns() // 1000


def hex_literal(text):
    """`text` as a MariaDB hex literal: no quoting to get wrong, whatever the SQL mode."""
    return "X'" + text.encode().hex() + "'"


def mariadb(sql):
    """Runs `sql` in one `mariadb` client; (exit code, stdout, stderr).

    Exit code None: the client did not finish within MARIADB_TIMEOUT (it is killed)."""
    argv = ["mariadb", "--batch", "--skip-column-names", "--connect-timeout=5"]
    for flag, name in (("-h", "MARIADB_HOST"), ("-P", "MARIADB_PORT"), ("-u", "MARIADB_USER")):
        if os.environ.get(name):
            argv += [flag, os.environ[name]]
    argv.append(os.environ["MARIADB_DATABASE"])
    try:
        p = subprocess.run(argv, input=sql, capture_output=True, text=True,
                           timeout=float(os.environ.get("MARIADB_TIMEOUT", "10")))
    except subprocess.TimeoutExpired:
        return None, "", "mariadb timed out"
    return p.returncode, p.stdout, p.stderr


def refused_as_stale(stderr):
    # "ERROR 1644 (45000) at line 2: FENCE stale token ..."
    return re.search(r"^ERROR \d+ \(45000\)[^:]*: FENCE stale token ", stderr, re.M) is not None


def main():
    for name in ("MARIADB_DATABASE", "FENCING_LOCK", "FENCING_TOKEN", "FENCEKIT_RUN",
                 "FENCEKIT_HISTORY"):
        if not os.environ.get(name):
            print(f"counter-mariadb.py: {name} is not set", file=sys.stderr)
            return 2
    token = os.environ["FENCING_TOKEN"]
    if not token.isdigit():
        print(f"counter-mariadb.py: FENCING_TOKEN={token!r} is not a number", file=sys.stderr)
        return 2
    key = "run-" + os.environ["FENCEKIT_RUN"]
    # The token check; FENCING=off (the control arm) leaves it out, nothing else changes.
    advance = ("" if os.environ.get("FENCING") == "off" else
               "INSERT INTO fencekit_fences (lock_name, highest) VALUES "
               f"({hex_literal(os.environ['FENCING_LOCK'])}, {token})\n"
               "  ON DUPLICATE KEY UPDATE highest = VALUES(highest);\n")

    # Transaction 1: the claim, then the read.
    start = now_us()
    code, out, err = mariadb(
        "START TRANSACTION;\n" + advance +
        f"SELECT COALESCE((SELECT value FROM pause_counter WHERE counter_key = "
        f"{hex_literal(key)}), 'null');\n"
        "COMMIT;\n")
    if code != 0:
        why = "refused as stale" if refused_as_stale(err) else f"mariadb exit {code}"
        print(f"counter-mariadb.py: the claim and read failed ({why}), token {token}: "
              f"not incrementing: {err.strip()}", file=sys.stderr)
        return 0
    read = out.strip()
    if read == "null":
        value_from, value = None, 1
    elif read.isdigit():
        value_from, value = int(read), int(read) + 1
    else:
        print(f"counter-mariadb.py: unexpected read {read!r}", file=sys.stderr)
        return 1

    time.sleep(float(os.environ.get("WORK_SECONDS", "0")))  # what a real worker does meanwhile

    # Transaction 2: the token check again, then the write of the value computed here.
    code, out, err = mariadb(
        "START TRANSACTION;\n" + advance +
        f"INSERT INTO pause_counter (counter_key, value) VALUES ({hex_literal(key)}, {value})\n"
        "  ON DUPLICATE KEY UPDATE value = VALUES(value);\n"
        "COMMIT;\n")
    end = now_us()
    if code == 0:
        outcome = "ok"
    elif refused_as_stale(err):
        outcome = "fail"  # the guard raised FENCE; the client's exit rolled the transaction back
    else:
        outcome = "unknown"  # no answer (connection lost, timeout), or another error
    if outcome != "ok":
        print(f"counter-mariadb.py: the write of {value} ({outcome}): {err.strip()}",
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
