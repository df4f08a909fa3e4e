#!/usr/bin/env python3
"""A `fencectl pause-test --worker` example: one increment of a counter kept in PostgreSQL.

docs/testing-with-pauses.md ("A Python worker against PostgreSQL") shows how to run it, with
the guard and without it (the control arm). Standard library only; it talks to the database
through `psql`, so any PostgreSQL client setup (~/.pgpass, PG* variables) works.

Environment:
  DATABASE_URL      the database, e.g. postgresql://app@127.0.0.1:5432/app (required); the
                    guard (fencedstore/sql/postgresql-guard.sql) and the table
                    pause_counter(key text primary key, value bigint) are in it:
                    postgres-setup.sh, given as --setup, loads and makes them
  FENCING_LOCK, FENCING_TOKEN   set by pause-test from the lease it holds
  FENCEKIT_RUN      the run number: the row is key 'run-<FENCEKIT_RUN>'
  FENCEKIT_HISTORY  the JSON-lines file this worker appends its one `cas` line to
  FENCING=off       the control arm: the same worker without the token check (both
                    fencekit_advance calls are skipped)
  WORK_SECONDS      how long the worker "works" between its read and its write (default 0):
                    the test's control arm sets 0.2, so that more pauses land inside the
                    read-modify-write
  PSQL_TIMEOUT      seconds a psql call may take (default 10); PGCONNECT_TIMEOUT (default 5
                    here) bounds its connection
  FENCEKIT_PROXY_PG set by `pause-test --proxy pg=HOST:PORT`: this client's proxy in front of
                    the server (HOST:PORT, DATABASE_URL's), which the kit may hold; psql
                    connects there, to the same database as the same user

One invocation is two transactions:
  1. fencekit_advance(lock, token), the claim: it raises the lock's fence to this token before
     the read, so that a paused holder's late write (transaction 2 with an older token) is
     refused; then it reads the value (absent: null);
  2. fencekit_advance(lock, token) again, then the value read + 1 is written (a lost update is
     then two `ok` cas lines from the same value).
It appends one line:
  {"op":"cas","key":"run-N","from":READ,"value":READ+1,"start_us":..,"end_us":..,"outcome":..}
outcome: ok when transaction 2 committed; fail when the guard refused it (SQLSTATE P0001, message FENCE stale token ...:
rolled back); unknown when psql got no answer (connection lost, timeout) or another error.
When transaction 1 does not succeed (a stale token included), nothing was written and nothing
is recorded. Exit code: 0 when the worker did its job (a refusal included), 2 when the
environment is incomplete.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse


def now_us():
    return time.time_ns() // 1000


def database_url():
    """DATABASE_URL, at this client's proxy when pause-test gives one (FENCEKIT_PROXY_PG)."""
    url = os.environ["DATABASE_URL"]
    proxy = os.environ.get("FENCEKIT_PROXY_PG")
    if not proxy:
        return url
    parts = urllib.parse.urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=(user + "@" if user else "") + proxy))


def psql(sql, variables):
    """Runs `sql` (psql script, variables as :'name') in one psql; (exit code, stdout, stderr).

    Exit code None: psql did not finish within PSQL_TIMEOUT (it is killed)."""
    argv = ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", database_url()]
    for name, value in variables.items():
        argv += ["-v", f"{name}={value}"]
    env = dict(os.environ)
    env.setdefault("PGCONNECT_TIMEOUT", "5")
    try:
        # VERBOSITY verbose puts the SQLSTATE in the error line:
        # "ERROR:  P0001: FENCE stale token 4 for lock ..."
        p = subprocess.run(argv, input="\\set VERBOSITY verbose\n" + sql, env=env,
                           capture_output=True, text=True,
                           timeout=float(os.environ.get("PSQL_TIMEOUT", "10")))
    except subprocess.TimeoutExpired:
        return None, "", "psql timed out"
    return p.returncode, p.stdout, p.stderr


def refused_as_stale(stderr):
    return re.search(r"ERROR:\s+P0001: FENCE stale token ", stderr) is not None


def main():
    for name in ("DATABASE_URL", "FENCING_LOCK", "FENCING_TOKEN", "FENCEKIT_RUN",
                 "FENCEKIT_HISTORY"):
        if not os.environ.get(name):
            print(f"counter-postgres.py: {name} is not set", file=sys.stderr)
            return 2
    token = os.environ["FENCING_TOKEN"]
    if not token.isdigit():
        print(f"counter-postgres.py: FENCING_TOKEN={token!r} is not a number", file=sys.stderr)
        return 2
    key = "run-" + os.environ["FENCEKIT_RUN"]
    variables = {"lock": os.environ["FENCING_LOCK"], "token": token, "key": key}
    # The token check; FENCING=off (the control arm) leaves it out, nothing else changes.
    advance = ("" if os.environ.get("FENCING") == "off" else
               "SELECT fencekit_advance(:'lock', :'token'::bigint) AS advanced \\gset\n")

    # Transaction 1: the claim, then the read.
    start = now_us()
    code, out, err = psql(
        "BEGIN;\n" + advance +
        "SELECT coalesce((SELECT value::text FROM pause_counter WHERE key = :'key'), 'null');\n"
        "COMMIT;\n", variables)
    if code != 0:
        why = "refused as stale" if code == 3 and refused_as_stale(err) else f"psql exit {code}"
        print(f"counter-postgres.py: the claim and read failed ({why}), token {token}: "
              f"not incrementing: {err.strip()}", file=sys.stderr)
        return 0
    read = out.strip()
    if read == "null":
        value_from, value = None, 1
    elif read.isdigit():
        value_from, value = int(read), int(read) + 1
    else:
        print(f"counter-postgres.py: unexpected read {read!r}", file=sys.stderr)
        return 1

    time.sleep(float(os.environ.get("WORK_SECONDS", "0")))  # what a real worker does meanwhile

    # Transaction 2: the token check again, then the write of the value computed here.
    code, out, err = psql(
        "BEGIN;\n" + advance +
        "INSERT INTO pause_counter (key, value) VALUES (:'key', :'value'::bigint)\n"
        "  ON CONFLICT (key) DO UPDATE SET value = excluded.value;\n"
        "COMMIT;\n", dict(variables, value=value))
    end = now_us()
    if code == 0:
        outcome = "ok"
    elif code == 3 and refused_as_stale(err):
        outcome = "fail"  # the guard refused the token: the transaction rolled back
    else:
        outcome = "unknown"  # no answer (exit 2: connection; None: timeout), or another error
    if outcome != "ok":
        print(f"counter-postgres.py: the write of {value} ({outcome}): {err.strip()}",
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
