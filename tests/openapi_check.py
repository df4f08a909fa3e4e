#!/usr/bin/python3
"""Checks docs/openapi.yaml against a running fenced.

Starts real fenced processes (and a redis-server for --verify-with) on loopback, provokes every
status the spec documents for every operation (the PROVOKERS table), and checks each answer's
status, headers, content type and JSON body against the spec. Fails when a documented status
has no provoker (unless listed in ELSEWHERE with the test that covers it), when an answer is not
as documented, when fenced serves a route or method the spec lacks, or the spec one fenced
lacks. Then GET /metrics of two of them (one with a verifying lock client) must pass
`promtool check metrics`.

Usage: openapi_check.py --fenced PATH --spec docs/openapi.yaml --promtool PATH
                        [--redis-server PATH]
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

TIMEOUT = 10.0
FAILURES = []


def fail(what):
    FAILURES.append(what)
    print("FAIL: " + what, file=sys.stderr)


# --- The spec ------------------------------------------------------------------------------

class Spec:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError("only local $ref is supported: " + ref)
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part]
        return node

    def operations(self):
        """(path, METHOD) -> operation object."""
        out = {}
        for path, item in self.doc["paths"].items():
            item = self.resolve(item)
            for method in ("get", "head", "put", "post", "delete", "patch", "options"):
                if method in item:
                    out[(path, method.upper())] = self.resolve(item[method])
        return out

    def response(self, path, method, status):
        op = self.operations().get((path, method))
        if op is not None and str(status) in op["responses"]:
            return self.resolve(op["responses"][str(status)])
        anywhere = self.doc.get("x-any-route-responses", {})
        if str(status) in anywhere:
            return self.resolve(anywhere[str(status)])
        return None


def validate(spec, schema, value, where):
    """The subset of JSON Schema the spec uses; returns a list of problems."""
    schema = spec.resolve(schema)
    problems = []
    for sub in schema.get("allOf", []):
        problems += validate(spec, sub, value, where)
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not validate(spec, s, value, where)]
        if len(matches) != 1:
            problems.append(f"{where}: {value!r} matches {len(matches)} of oneOf")
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return problems + [f"{where}: {value!r} is not an integer"]
    elif kind in types and not isinstance(value, types[kind]):
        return problems + [f"{where}: {value!r} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} > {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema:
        if not re.search(schema["pattern"], value):
            problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{where}: required field {name!r} is missing")
        for name, v in value.items():
            if name in props:
                problems += validate(spec, props[name], v, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: field {name!r} is not documented")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                problems += validate(spec, schema["items"], v, f"{where}[{i}]")
    return problems


# --- Processes -----------------------------------------------------------------------------

class Fenced:
    def __init__(self, binary, workdir, name, *args):
        self.log = open(os.path.join(workdir, name + ".log"), "w+b")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--db", os.path.join(workdir, name + ".db"),
             *args], stdout=subprocess.PIPE, stderr=self.log)
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line or b"listening on" in line:
                break
        m = re.search(rb"listening on https?://[^:]+:(\d+)", line)
        if not m:
            self.stop()
            self.log.seek(0)
            raise RuntimeError(f"fenced {name} did not start: {line!r} {self.log.read()[-2000:]!r}")
        self.port = int(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, binary, workdir):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


# --- HTTP ----------------------------------------------------------------------------------

class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        values = [v for n, v in self.headers if n.lower() == name.lower()]
        return values[0] if values else None


def read_answer(sock, head_request=False, stream=False, timeout=TIMEOUT):
    data = b""
    sock.settimeout(timeout)
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return Answer(0, [], data)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0]) if lines and lines[0] else None
    if not m:
        return Answer(0, [], data)
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
    answer = Answer(int(m.group(1)), headers, b"")
    if head_request or (stream and answer.status == 200):
        return answer
    length = int(answer.header("Content-Length") or 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    answer.body = rest[:length]
    return answer


def call(port, method, target, headers=(), body=b"", raw=None, stream=False):
    if isinstance(body, str):
        body = body.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        if raw is None:
            req = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            for name, value in headers:
                req += f"{name}: {value}\r\n"
            if body or method in ("PUT", "POST"):
                req += f"Content-Length: {len(body)}\r\n"
            raw = req.encode() + b"\r\n" + body
        try:
            s.sendall(raw)
        except OSError:
            pass  # the server may answer and close before it has read everything (413)
        return read_answer(s, head_request=(method == "HEAD"), stream=stream)


# --- What provokes each documented status --------------------------------------------------

class Servers:
    """The fenced processes the provokers talk to."""

    def __init__(self, binary, redis_binary, workdir):
        auth = os.path.join(workdir, "auth.json")
        with open(auth, "w") as f:
            # "t" may read and write k/; "blind-t" may only write k/; "admin-t" is admin
            # (digests: printf %s TOKEN | sha256sum).
            json.dump({"principals": [
                {"name": "user", "read": ["k/"], "write": ["k/"], "token_sha256":
                 "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"},
                {"name": "blind", "write": ["k/"], "token_sha256":
                 "beb747a2e228ccf786261552f763a7efbfda7a1853368f8ba96d4a1b5219e455"},
                {"name": "admin", "admin": True, "token_sha256":
                 "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c"}]}, f)
        self.redis = Redis(redis_binary, workdir)
        self.all = []
        self.plain = self.start(binary, workdir, "plain")
        self.auth = self.start(binary, workdir, "auth", "--auth", auth)
        self.small = self.start(binary, workdir, "small", "--max-connections", "2",
                                "--max-event-streams", "1")
        self.verify = self.start(binary, workdir, "verify", "--verify-with",
                                 f"redis://127.0.0.1:{self.redis.port}")
        self.require = self.start(binary, workdir, "require", "--require-service")
        self.tight = self.start(binary, workdir, "tight", "--max-response-memory", "64KiB")

    def start(self, binary, workdir, name, *args):
        f = Fenced(binary, workdir, name, *args)
        self.all.append(f)
        return f

    def stop(self):
        for f in self.all:
            f.stop()
        self.redis.stop()


USER = ("Authorization", "Bearer t")
BLIND = ("Authorization", "Bearer blind-t")
ADMIN = ("Authorization", "Bearer admin-t")
BIG = "x" * (1024 * 1024 + 1)


def put(port, key, token, *headers, body="v"):
    return call(port, "PUT", "/v1/objects/" + key, [("Fencing-Token", str(token)), *headers], body)


def delete(port, key, token, *headers):
    return call(port, "DELETE", "/v1/objects/" + key, [("Fencing-Token", str(token)), *headers])


def batch(port, lock, token, writes, *headers):
    return call(port, "POST", "/v1/batch", [("Content-Type", "application/json"), *headers],
                json.dumps({"lock": lock, "token": token, "writes": writes}))


def stale(port, key):
    put(port, key, 9)
    return put(port, key, 3)


def wrong_lock(port, key):
    put(port, key, 1, ("Fencing-Lock", key + "-a"))
    return put(port, key, 1, ("Fencing-Lock", key + "-b"))


def wrong_service(port, key):
    put(port, key, 1, ("Fencing-Service", "svc:a"))
    return put(port, key, 2, ("Fencing-Service", "svc:b"))


def too_many_streams(s):
    with socket.create_connection(("127.0.0.1", s.small.port), timeout=TIMEOUT) as first:
        first.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        if read_answer(first, stream=True).status != 200:
            return Answer(0, [], b"the first stream did not open")
        return call(s.small.port, "GET", "/v1/events", stream=True)


def too_many_connections(s):
    held = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            held.append(socket.create_connection(("127.0.0.1", s.small.port), timeout=TIMEOUT))
            if len(held) <= 2:
                continue  # both allowed connections, held idle
            answer = read_answer(held[-1], timeout=1)  # an accepted one says nothing
            if answer.status == 503:
                return answer
            held.pop().close()  # accepted before the others were counted: try again
        return Answer(0, [], b"no connection was refused")
    finally:
        for h in held:
            h.close()


def verify_unavailable(s):
    s.redis.stop()
    return put(s.verify.port, "vk", 7)


def setup_object(port, key):
    put(port, key, 1)
    return port


P, A = "plain", "auth"
# (path, method, status, provoker(servers) -> Answer, expected "error" or None)
PROVOKERS = [
    ("/v1/objects/{key}", "GET", 200, lambda s: (put(s.plain.port, "g", 1), call(s.plain.port, "GET", "/v1/objects/g"))[1], None),
    ("/v1/objects/{key}", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/objects/a%01"), "bad_key"),
    ("/v1/objects/{key}", "GET", 401, lambda s: call(s.auth.port, "GET", "/v1/objects/k/a"), "unauthorized"),
    ("/v1/objects/{key}", "GET", 403, lambda s: call(s.auth.port, "GET", "/v1/objects/other", [USER]), "forbidden"),
    ("/v1/objects/{key}", "GET", 404, lambda s: call(s.plain.port, "GET", "/v1/objects/absent"), "not_found"),
    ("/v1/objects/{key}", "GET", 503, lambda s: (put(s.tight.port, "large", 1, body="x" * 100_000), call(s.tight.port, "GET", "/v1/objects/large"))[1], "busy"),
    ("/v1/objects/{key}", "HEAD", 200, lambda s: (put(s.plain.port, "h", 1), call(s.plain.port, "HEAD", "/v1/objects/h"))[1], None),
    ("/v1/objects/{key}", "HEAD", 400, lambda s: call(s.plain.port, "HEAD", "/v1/objects/%ZZ"), None),
    ("/v1/objects/{key}", "HEAD", 401, lambda s: call(s.auth.port, "HEAD", "/v1/objects/k/a"), None),
    ("/v1/objects/{key}", "HEAD", 403, lambda s: call(s.auth.port, "HEAD", "/v1/objects/other", [USER]), None),
    ("/v1/objects/{key}", "HEAD", 404, lambda s: call(s.plain.port, "HEAD", "/v1/objects/absent"), None),
    ("/v1/objects/{key}", "PUT", 201, lambda s: put(s.plain.port, "p1", 1), None),
    ("/v1/objects/{key}", "PUT", 200, lambda s: (put(s.plain.port, "p2", 1), put(s.plain.port, "p2", 1))[1], None),
    ("/v1/objects/{key}", "PUT", 400, lambda s: put(s.plain.port, "p3", "01"), "invalid_token"),
    ("/v1/objects/{key}", "PUT", 400, lambda s: put(s.require.port, "p3", 1), "service_required"),
    ("/v1/objects/{key}", "PUT", 400, lambda s: put(s.plain.port, "p3", 1, ("If-Match", "*")), "bad_precondition"),
    ("/v1/objects/{key}", "PUT", 401, lambda s: put(s.auth.port, "k/p", 1), "unauthorized"),
    ("/v1/objects/{key}", "PUT", 403, lambda s: put(s.auth.port, "other", 1, USER), "forbidden"),
    ("/v1/objects/{key}", "PUT", 403, lambda s: put(s.verify.port, "vk", 7), "unverified_token"),
    ("/v1/objects/{key}", "PUT", 409, lambda s: stale(s.plain.port, "p4"), "stale_token"),
    ("/v1/objects/{key}", "PUT", 409, lambda s: wrong_lock(s.plain.port, "p5"), "wrong_lock"),
    ("/v1/objects/{key}", "PUT", 409, lambda s: wrong_service(s.plain.port, "p6"), "wrong_service"),
    ("/v1/objects/{key}", "PUT", 412, lambda s: put(s.plain.port, "p7", 1, ("If-Match", '"99"')), "precondition_failed"),
    ("/v1/objects/{key}", "PUT", 428, lambda s: call(s.plain.port, "PUT", "/v1/objects/p8", body="v"), "missing_token"),
    ("/v1/objects/{key}", "PUT", 503, verify_unavailable, "verify_unavailable"),
    ("/v1/objects/{key}", "DELETE", 200, lambda s: delete(s.plain.port, "d1", 1), None),
    ("/v1/objects/{key}", "DELETE", 400, lambda s: delete(s.plain.port, "d1", "x"), "invalid_token"),
    ("/v1/objects/{key}", "DELETE", 401, lambda s: delete(s.auth.port, "k/d", 1), "unauthorized"),
    ("/v1/objects/{key}", "DELETE", 403, lambda s: delete(s.auth.port, "other", 1, USER), "forbidden"),
    ("/v1/objects/{key}", "DELETE", 409, lambda s: (put(s.plain.port, "d2", 9), delete(s.plain.port, "d2", 2))[1], "stale_token"),
    ("/v1/objects/{key}", "DELETE", 412, lambda s: delete(s.plain.port, "d3", 1, ("If-Match", '"99"')), "precondition_failed"),
    ("/v1/objects/{key}", "DELETE", 428, lambda s: call(s.plain.port, "DELETE", "/v1/objects/d4"), "missing_token"),
    ("/v1/objects", "GET", 200, lambda s: (put(s.plain.port, "l%2Fa", 1), call(s.plain.port, "GET", "/v1/objects?prefix=l%2F&limit=1"))[1], None),
    ("/v1/objects", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/objects?limit=0"), "bad_limit"),
    ("/v1/objects", "GET", 200, lambda s: call(s.plain.port, "GET", "/v1/objects?limit="), None),
    ("/v1/objects", "GET", 200, lambda s: call(s.plain.port, "GET", "/v1/objects?limit=01"), None),
    ("/v1/objects", "GET", 401, lambda s: call(s.auth.port, "GET", "/v1/objects"), "unauthorized"),
    ("/v1/objects", "GET", 403, lambda s: call(s.auth.port, "GET", "/v1/objects?prefix=other", [USER]), "forbidden"),
    ("/v1/batch", "POST", 200, lambda s: batch(s.plain.port, "b", 1, [{"op": "put", "key": "b1", "value": "v"}, {"op": "delete", "key": "b2"}]), None),
    ("/v1/batch", "POST", 400, lambda s: batch(s.plain.port, "b", 1, []), "bad_body"),
    ("/v1/batch", "POST", 400, lambda s: call(s.plain.port, "POST", "/v1/batch", [], '{"lock":"b","lock":"c","token":1,"writes":[{"op":"delete","key":"x"}]}'), "bad_body"),
    ("/v1/batch", "POST", 400, lambda s: call(s.plain.port, "POST", "/v1/batch?x=1", [], '{}'), "bad_target"),
    ("/v1/batch", "POST", 401, lambda s: batch(s.auth.port, "k/b", 1, [{"op": "delete", "key": "k/b"}]), "unauthorized"),
    ("/v1/batch", "POST", 403, lambda s: batch(s.auth.port, "k/b", 1, [{"op": "delete", "key": "other"}], USER), "forbidden"),
    ("/v1/batch", "POST", 409, lambda s: (batch(s.plain.port, "bs", 9, [{"op": "delete", "key": "b3"}]), batch(s.plain.port, "bs", 3, [{"op": "delete", "key": "b3"}]))[1], "stale_token"),
    ("/v1/batch", "POST", 412, lambda s: batch(s.plain.port, "bp", 1, [{"op": "put", "key": "b4", "value": "v", "if_version": 99}]), "precondition_failed"),
    ("/v1/batch", "POST", 413, lambda s: batch(s.plain.port, "bl", 1, [{"op": "delete", "key": "x"}] * 1001), "batch_too_large"),
    ("/v1/fences/{lock}", "GET", 200, lambda s: (put(s.plain.port, "f", 4, ("Fencing-Service", "svc:a")), call(s.plain.port, "GET", "/v1/fences/f"))[1], None),
    ("/v1/fences/{lock}", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/fences/a%01"), "bad_lock"),
    ("/v1/fences/{lock}", "GET", 401, lambda s: call(s.auth.port, "GET", "/v1/fences/k/l"), "unauthorized"),
    ("/v1/fences/{lock}", "GET", 403, lambda s: call(s.auth.port, "GET", "/v1/fences/other", [USER]), "forbidden"),
    ("/v1/fences/{lock}", "PUT", 200, lambda s: call(s.auth.port, "PUT", "/v1/fences/k/l", [ADMIN], '{"highest": 40}'), None),
    ("/v1/fences/{lock}", "PUT", 400, lambda s: call(s.auth.port, "PUT", "/v1/fences/k/l", [ADMIN], '{"highest": 0}'), "bad_body"),
    ("/v1/fences/{lock}", "PUT", 400, lambda s: call(s.plain.port, "PUT", "/v1/fences/l?x=1", [], '{"highest": 4}'), "bad_target"),
    ("/v1/fences/{lock}", "PUT", 401, lambda s: call(s.auth.port, "PUT", "/v1/fences/k/l", [], '{"highest": 4}'), "unauthorized"),
    ("/v1/fences/{lock}", "PUT", 403, lambda s: call(s.plain.port, "PUT", "/v1/fences/l", [], '{"highest": 4}'), "forbidden"),
    ("/v1/history", "GET", 200, lambda s: (stale(s.plain.port, "hs"), call(s.plain.port, "GET", "/v1/history?limit=5"))[1], None),
    ("/v1/history", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/history?limit=10001"), "bad_limit"),
    ("/v1/history", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/history?limit=1&limit=2"), "bad_target"),
    ("/v1/history", "GET", 401, lambda s: call(s.auth.port, "GET", "/v1/history"), "unauthorized"),
    ("/v1/history", "GET", 403, lambda s: call(s.auth.port, "GET", "/v1/history", [USER]), "forbidden"),
    ("/v1/events", "GET", 200, lambda s: call(s.plain.port, "GET", "/v1/events", stream=True), None),
    ("/v1/events", "GET", 400, lambda s: call(s.plain.port, "GET", "/v1/events?x=1"), "bad_target"),
    ("/v1/events", "GET", 401, lambda s: call(s.auth.port, "GET", "/v1/events", stream=True), "unauthorized"),
    ("/v1/events", "GET", 403, lambda s: call(s.auth.port, "GET", "/v1/events", [BLIND]), "forbidden"),
    ("/v1/events", "GET", 503, too_many_streams, "too_many_streams"),
    ("/ui", "GET", 200, lambda s: call(s.auth.port, "GET", "/ui"), None),
    ("/ui", "GET", 400, lambda s: call(s.auth.port, "GET", "/ui?x=1"), "bad_target"),
    ("/ui", "HEAD", 400, lambda s: call(s.auth.port, "HEAD", "/ui?x=1"), None),
    ("/ui/app.js", "GET", 400, lambda s: call(s.auth.port, "GET", "/ui/app.js?x"), "bad_target"),
    ("/ui/app.js", "HEAD", 400, lambda s: call(s.auth.port, "HEAD", "/ui/app.js?x"), None),
    ("/ui/app.css", "GET", 400, lambda s: call(s.auth.port, "GET", "/ui/app.css#x"), "bad_target"),
    ("/ui/app.css", "HEAD", 400, lambda s: call(s.auth.port, "HEAD", "/ui/app.css?x"), None),
    ("/ui", "HEAD", 200, lambda s: call(s.auth.port, "HEAD", "/ui"), None),
    ("/ui/app.js", "GET", 200, lambda s: call(s.auth.port, "GET", "/ui/app.js"), None),
    ("/ui/app.js", "HEAD", 200, lambda s: call(s.auth.port, "HEAD", "/ui/app.js"), None),
    ("/ui/app.css", "GET", 200, lambda s: call(s.auth.port, "GET", "/ui/app.css"), None),
    ("/ui/app.css", "HEAD", 200, lambda s: call(s.auth.port, "HEAD", "/ui/app.css"), None),
    ("/healthz", "GET", 200, lambda s: call(s.auth.port, "GET", "/healthz"), None),
    ("/healthz", "GET", 400, lambda s: call(s.auth.port, "GET", "/healthz?x=1"), "bad_target"),
    ("/readyz", "GET", 400, lambda s: call(s.auth.port, "GET", "/readyz?x=1"), "bad_target"),
    ("/metrics", "GET", 400, lambda s: call(s.plain.port, "GET", "/metrics?x=1"), "bad_target"),
    ("/readyz", "GET", 200, lambda s: call(s.auth.port, "GET", "/readyz"), None),
    ("/metrics", "GET", 200, lambda s: call(s.plain.port, "GET", "/metrics"), None),
    ("/metrics", "GET", 401, lambda s: call(s.auth.port, "GET", "/metrics"), "unauthorized"),
    ("/metrics", "GET", 403, lambda s: call(s.auth.port, "GET", "/metrics", [USER]), "forbidden"),
    # The answers any route may give (x-any-route-responses).
    ("*", "PUT", 400, lambda s: call(s.plain.port, "GET", "", raw=b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), "bad_host"),
    ("*", "GET", 401, lambda s: call(s.auth.port, "GET", "/nothing"), "unauthorized"),
    ("*", "GET", 404, lambda s: call(s.plain.port, "GET", "/nothing"), "not_found"),
    ("*", "POST", 405, lambda s: call(s.plain.port, "POST", "/v1/history"), "method_not_allowed"),
    ("*", "PUT", 413, lambda s: put(s.plain.port, "big", 1, body=BIG), "body_too_large"),
    ("*", "GET", 431, lambda s: call(s.plain.port, "GET", "/healthz", [("X-Big", "y" * 17000)]), "headers_too_large"),
    ("*", "PUT", 501, lambda s: call(s.plain.port, "PUT", "", raw=b"PUT /v1/objects/te HTTP/1.1\r\nHost: a\r\nFencing-Token: 1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"), "unsupported_transfer_coding"),
    ("*", "GET", 503, too_many_connections, "too_many_connections"),
]

# Documented statuses that need a failing database or a full queue, with the tests that provoke
# them against the real server.
ELSEWHERE = {
    ("/v1/objects/{key}", "DELETE", 503): "storage_error: tests/httpapi/http_ops_test.cc (fault VFS)",
    ("/v1/objects", "GET", 503): "busy: tests/httpapi/http_hostile_test.cc LongReadsBeyondTheQueueGet503Busy",
    ("/v1/batch", "POST", 503): "storage_error: tests/httpapi/http_ops_test.cc (fault VFS)",
    ("/v1/fences/{lock}", "PUT", 503): "busy: the fence administration queue",
    ("/v1/history", "GET", 503): "busy: tests/httpapi/http_hostile_test.cc LongReadsBeyondTheQueueGet503Busy",
    ("/healthz", "GET", 503): "tests/httpapi/http_ops_test.cc HealthzIs503WhenTheDatabaseCannotBeRead",
    ("/readyz", "GET", 503): "tests/httpapi/http_ops_test.cc ReadyzIs503WhileCommitsFailAndReadyAgainWithoutAWrite",
}


def check_answer(spec, path, method, status, answer, error):
    where = f"{method} {path} {status}" + (f" ({error})" if error else "")
    if answer.status != status:
        return fail(f"{where}: got status {answer.status}: {answer.body[:300]!r}")
    response = spec.response(path, method, status)
    if response is None:
        return fail(f"{where}: the spec does not document this status")
    for name, header in response.get("headers", {}).items():
        header = spec.resolve(header)
        value = answer.header(name)
        if value is None:
            # Fencing-Highest is on stale_token answers only; every other header always.
            if name != "Fencing-Highest" or error == "stale_token":
                fail(f"{where}: no {name} header")
            continue
        for p in validate(spec, header.get("schema", {}), value, f"{where} header {name}"):
            fail(p)
    content = response.get("content")
    if method == "HEAD" or content is None:
        if answer.body:
            fail(f"{where}: a body the spec does not document: {answer.body[:100]!r}")
        return
    ctype = answer.header("Content-Type")
    if ctype not in content:
        return fail(f"{where}: Content-Type {ctype!r} is not one of {list(content)}")
    if ctype != "application/json":
        return
    try:
        body = json.loads(answer.body)
    except ValueError:
        return fail(f"{where}: the body is not JSON: {answer.body[:200]!r}")
    for p in validate(spec, content[ctype]["schema"], body, where + " body"):
        fail(p)
    if error is not None and body.get("error") != error:
        fail(f"{where}: error {body.get('error')!r}, expected {error!r}")


def check_routes(spec, servers):
    """Every path fenced serves is in the spec with the same methods, and the reverse."""
    ops = spec.operations()
    documented = {}
    for path, method in ops:
        documented.setdefault(path, set()).add(method)
    # fenced's own list of its routes, from the answer to a path it has no route for.
    message = json.loads(call(servers.plain.port, "GET", "/nothing").body)["message"]
    listed = set(re.findall(r"(/[a-z0-9/{}]+)", message.split("routes are", 1)[1]))
    for route in listed:
        if route not in documented:
            fail(f"fenced serves {route}, which the spec does not document")
    for path in documented:
        if path not in listed and not path.startswith("/ui/"):
            fail(f"the spec documents {path}, which fenced does not list among its routes")
    # The methods: a method the spec lacks gets 405, whose Allow lists the spec's methods.
    samples = {"{key}": "k", "{lock}": "l"}
    for path, methods in documented.items():
        target = path
        for k, v in samples.items():
            target = target.replace(k, v)
        answer = call(servers.plain.port, "PATCH", target)
        if answer.status != 405:
            fail(f"PATCH {target}: status {answer.status}, expected 405")
            continue
        allow = {m.strip() for m in (answer.header("Allow") or "").split(",")}
        if allow != methods:
            fail(f"{path}: fenced allows {sorted(allow)}, the spec documents {sorted(methods)}")


def check_metrics(promtool, text):
    """The Prometheus text exposition through Prometheus' own linter."""
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    if r.returncode != 0:
        fail("promtool check metrics: " + (r.stdout + r.stderr).decode(errors="replace").strip())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fenced", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--promtool", required=True,
                        help="Prometheus' promtool: GET /metrics must pass 'check metrics'")
    args = parser.parse_args()
    spec = Spec(args.spec)

    # Every documented status has a provoker or is covered elsewhere, and nothing else is listed.
    documented = set()
    for (path, method), op in spec.operations().items():
        for status in op["responses"]:
            documented.add((path, method, int(status)))
    any_route = {int(s) for s in spec.doc.get("x-any-route-responses", {})}
    provoked = {(p, m, st) for p, m, st, _, _ in PROVOKERS if p != "*"}
    for item in sorted(documented - provoked - set(ELSEWHERE)):
        fail(f"{item[1]} {item[0]} {item[2]} is documented but nothing here provokes it")
    for item in sorted((provoked | set(ELSEWHERE)) - documented):
        fail(f"{item[1]} {item[0]} {item[2]} is provoked here but not documented")
    for status in sorted(any_route - {st for p, _, st, _, _ in PROVOKERS if p == "*"}):
        fail(f"any-route status {status} is documented but nothing here provokes it")

    with tempfile.TemporaryDirectory() as workdir:
        servers = Servers(args.fenced, args.redis_server, workdir)
        try:
            check_routes(spec, servers)
            # verify_unavailable stops redis-server: last.
            ordered = sorted(PROVOKERS, key=lambda p: p[3] is verify_unavailable)
            for path, method, status, provoke, error in ordered:
                check_answer(spec, path, method, status, provoke(servers), error)
            # Every counter and histogram now has samples, and the verifying fenced appends its
            # lock client's metrics.
            for f in (servers.plain, servers.verify):
                check_metrics(args.promtool, call(f.port, "GET", "/metrics").body)
        finally:
            servers.stop()
    checked = len(PROVOKERS)
    if FAILURES:
        print(f"openapi: {len(FAILURES)} problems in {checked} checked answers", file=sys.stderr)
        return 1
    print(f"openapi: {checked} answers and every route match docs/openapi.yaml "
          f"({len(ELSEWHERE)} statuses covered by other tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
