#!/usr/bin/env bash
# The etcd guard's cost: the guard's transaction (compare the 20-digit fence; else put the fence
# and the data: docs/guard-in-your-database.md, "etcd") against a plain put of the same data
# key, on one loopback etcd member started here, in etcd's two protocols: gRPC (what etcdctl and
# etcd's client libraries speak) and the v3 JSON gateway (what fencekit's EtcdGuard and the
# Python pause-test worker speak). One Python client keeps one connection per protocol and sends
# one request at a time; all arms take turns, round after round (the order reverses every
# round). Medians of the rounds' writes per second and latencies, and per protocol the ratio
# (plain / guarded rate: how many times slower the guarded write is). Figures:
# docs/benchmarks.md.
#
# Usage: bench/guard_etcd_bench.sh [writes per arm and round, default 2000] [rounds, default 5]
# Needs: etcd (etcd-server), python3 with grpc (python3-grpcio); the gRPC messages are encoded
# here by hand, so no generated code.
# Environment:
#   ETCD_DIR   where etcd keeps its data (default: a temp folder). Each write waits for etcd's
#              fsync of its log, which sets both rates: keep it on the disk you mean to measure.
#   ETCD_ARGS  extra etcd arguments
#   EXPLAIN=1  adds arms that split the cost: txn-put (the data put alone inside a transaction:
#              what any conditional write in etcd costs; both protocols), txn-compare-put (the
#              guard's compare and the data put, without the fence put) and guarded-reading (the
#              guard whose refusing branch reads the fence, as before 2026-11-27), the last two
#              through the gateway; starts etcd with --metrics extensive and prints each arm's
#              time inside etcd's gRPC handler (the rest is the protocol, HTTP and the client)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-2000}"
rounds="${2:-5}"
source "$root/bench/lib.sh"
command -v etcd >/dev/null || { echo "etcd not found (apt-get install etcd-server)" >&2; exit 1; }
# Debian's python3-grpcio is for Debian's python3, which another python3 on PATH may not be.
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import grpc" 2>/dev/null; then python="$p"; break; fi
done
[ -n "$python" ] || { echo "python3 with grpc not found (apt-get install python3-grpcio)" >&2; exit 1; }

work="$(mktemp -d)"
data="${ETCD_DIR:-$work/etcd}"
etcd_pid=""
cleanup() {
  stop_pids ${etcd_pid:+"$etcd_pid"}
  rm -rf "$work"
}
on_exit cleanup

explain="${EXPLAIN:-0}"
metrics=()
[ "$explain" = 1 ] && metrics=(--metrics extensive)
# shellcheck disable=SC2086  # ETCD_ARGS is a list of options
start_etcd "$data" "$work/etcd.log" "${metrics[@]}" ${ETCD_ARGS:-}

echo "writes=$n rounds=$rounds etcd=$(etcd --version | awk 'NR==1{print $3}') $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$port" "$n" "$rounds" "$explain" <<'EOF'
import base64, http.client, json, re, statistics, sys, time
import grpc

port, n, rounds, explain = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
FENCE, DATA = b"bench/fence", b"bench/data"
token = lambda t: b"%020d" % t
# The token stays 5: after the first write each guarded one is the equal-token case.
TOKEN = token(5)

# The JSON gateway: one HTTP/1.1 connection, keys and values in base64.
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
b64 = lambda b: base64.b64encode(b).decode()

def post(path, body):
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    reply = r.read()
    if r.status != 200:
        sys.exit(f"{path}: HTTP {r.status}: {reply[:200]!r}")
    return reply

def json_guard(tok, *writes, refusing=()):
    """The guard's transaction, `writes` in its writing branch, `refusing` in the other."""
    return json.dumps({
        "compare": [{"key": b64(FENCE), "target": "VALUE", "result": "GREATER", "value": b64(tok)}],
        **({"success": list(refusing)} if refusing else {}), "failure": list(writes)})
json_put = lambda key, tok: {"request_put": {"key": b64(key), "value": b64(tok)}}
json_refused = lambda reply: b'"succeeded":true' in reply

# gRPC: etcd's KV service, the messages encoded by hand (field numbers of etcd's rpc.proto).
def varint(v):
    out = bytearray()
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))
field = lambda num, payload: varint(num << 3 | 2) + varint(len(payload)) + payload
enum = lambda num, v: varint(num << 3) + varint(v)
pb_put_request = lambda key, value: field(1, key) + field(2, value)   # PutRequest
pb_put_op = lambda key, value: field(2, pb_put_request(key, value))    # RequestOp.request_put
GREATER, VALUE = 1, 3                                                 # Compare's enums
def pb_guard(tok):
    """TxnRequest: compare (1) the fence's value > tok; failure (3): put fence, put data."""
    compare = enum(1, GREATER) + enum(2, VALUE) + field(3, FENCE) + field(7, tok)
    return field(1, compare) + field(3, pb_put_op(FENCE, tok)) + field(3, pb_put_op(DATA, tok))

def pb_refused(reply):
    """TxnResponse.succeeded (field 2), read off the top-level fields."""
    i = 0
    while i < len(reply):
        tag, i = decode_varint(reply, i)
        if tag & 7 == 0:
            value, i = decode_varint(reply, i)
            if tag >> 3 == 2:
                return value == 1
        else:
            length, i = decode_varint(reply, i)
            i += length
    return False

def decode_varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        i += 1
        if b[i - 1] < 0x80:
            return v, i
        shift += 7

channel = grpc.insecure_channel("127.0.0.1:%d" % port)
raw = lambda b: b
rpc = {m: channel.unary_unary("/etcdserverpb.KV/" + m, request_serializer=raw,
                              response_deserializer=raw) for m in ("Put", "Txn")}
call = lambda method, body: lambda: rpc[method](body, timeout=10)
gateway = lambda path, body: lambda: post(path, body)

# Each arm: (protocol, etcd's method, one write). Ratios are against the protocol's plain put.
arms = {
    "put": ("gateway", "Put", gateway("/v3/kv/put", json.dumps({"key": b64(DATA), "value": b64(TOKEN)}))),
    "guarded": ("gateway", "Txn", gateway("/v3/kv/txn", json_guard(TOKEN, json_put(FENCE, TOKEN), json_put(DATA, TOKEN)))),
    "grpc-put": ("grpc", "Put", call("Put", pb_put_request(DATA, TOKEN))),
    "grpc-guarded": ("grpc", "Txn", call("Txn", pb_guard(TOKEN))),
}
if explain:
    arms["txn-put"] = ("gateway", "Txn", gateway("/v3/kv/txn", json.dumps({"success": [json_put(DATA, TOKEN)]})))
    arms["txn-compare-put"] = ("gateway", "Txn", gateway("/v3/kv/txn", json_guard(TOKEN, json_put(DATA, TOKEN))))
    arms["guarded-reading"] = ("gateway", "Txn", gateway("/v3/kv/txn", json_guard(
        TOKEN, json_put(FENCE, TOKEN), json_put(DATA, TOKEN), refusing=[{"request_range": {"key": b64(FENCE)}}])))
    arms["grpc-txn-put"] = ("grpc", "Txn", call("Txn", field(2, pb_put_op(DATA, TOKEN))))
base = {"gateway": "put", "grpc": "grpc-put"}

# Both encodings are the guard: token 5 is written, then a token-4 write is refused in each.
for arm in arms:  # also warms up both connections and every path
    arms[arm][2]()
if json_refused(arms["guarded"][2]()) or pb_refused(arms["grpc-guarded"][2]()):
    sys.exit("the guarded write at the fence's own token was refused")
if not json_refused(post("/v3/kv/txn", json_guard(token(4), json_put(FENCE, token(4)), json_put(DATA, b"stale")))):
    sys.exit("the gateway's guard let a stale token write")
if not pb_refused(rpc["Txn"](pb_guard(token(4)), timeout=10)):
    sys.exit("the gRPC guard let a stale token write")
if b"stale" in post("/v3/kv/range", json.dumps({"key": b64(DATA)})):
    sys.exit("a refused write changed the data")

def handler_seconds(method):
    """etcd's gRPC handling time so far, (seconds, calls), for `method` (--metrics extensive)."""
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    pick = lambda what: float(re.search(
        r'grpc_server_handling_seconds_%s\{grpc_method="%s"[^}]*\} (\S+)' % (what, method),
        body).group(1))
    return pick("sum"), pick("count")

def run(arm):
    _, method, write = arms[arm]
    before = handler_seconds(method) if explain else None
    lat = []
    begin = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        write()
        lat.append(time.perf_counter() - t)
    rate = n / (time.perf_counter() - begin)
    inside = 0.0
    if explain:
        after = handler_seconds(method)
        inside = (after[0] - before[0]) / (after[1] - before[1]) * 1e6
    return rate, statistics.median(lat) * 1e6, inside

results = {arm: [] for arm in arms}
for r in range(rounds):
    for arm in (list(arms) if r % 2 == 0 else list(reversed(arms))):
        results[arm].append(run(arm))
    print("round %d: " % (r + 1) + "; ".join(
        "%s %.0f/s p50 %.0f us" % (arm, *results[arm][-1][:2]) for arm in arms))
med = lambda arm, i: statistics.median(x[i] for x in results[arm])
ratios = lambda arm: [p[0] / g[0] for p, g in zip(results[base[arms[arm][0]]], results[arm])]
for protocol, guarded in (("grpc", "grpc-guarded"), ("gateway", "guarded")):
    put = base[protocol]
    ratio = med(put, 0) / med(guarded, 0)
    print("%-7s put %.0f/s (p50 %.0f us)  guarded %.0f/s (p50 %.0f us)  ratio (put/guarded) "
          "%.2fx (target <= 1.2x: %s), same-round ratios %s" % (
              protocol, med(put, 0), med(put, 1), med(guarded, 0), med(guarded, 1), ratio,
              "met" if ratio <= 1.2 else "not met", " ".join("%.2f" % x for x in ratios(guarded))))
if explain:
    for arm in arms:
        print("  %-16s %6.0f/s  time / its protocol's put: %.2f (median of the rounds' ratios)  "
              "inside etcd's handler %4.0f us, outside %4.0f us" % (
                  arm, med(arm, 0), statistics.median(ratios(arm)), med(arm, 2),
                  1e6 / med(arm, 0) - med(arm, 2)))
EOF
