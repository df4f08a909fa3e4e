#!/usr/bin/env bash
# The etcd guard's cost: the guard's transaction (compare the 20-digit fence; else put the fence
# and the data: docs/guard-in-your-database.md, "etcd") against a plain put of the same data
# key, on one loopback etcd member started here, through its v3 JSON gateway. One Python
# client (standard library) keeps one HTTP/1.1 connection and sends one request at a time; the
# two arms take turns, round after round (which goes first alternates). Medians of the rounds'
# writes per second and latencies, and the ratio (plain / guarded rate: how many times slower
# the guarded write is). Figures: docs/benchmarks.md.
#
# Usage: bench/guard_etcd_bench.sh [writes per arm and round, default 2000] [rounds, default 5]
# Environment:
#   ETCD_DIR   where etcd keeps its data (default: a temp folder). Each write waits for etcd's
#              fsync of its log, which sets both rates: keep it on the disk you mean to measure.
#   ETCD_ARGS  extra etcd arguments
#   EXPLAIN=1  adds arms that split the cost: txn-put (the data put alone inside a transaction:
#              what any conditional write in etcd costs), txn-compare-put (the guard's compare
#              and the data put, without the fence put) and guarded-reading (the guard whose
#              refusing branch reads the fence, as before 2026-11-27); starts etcd with
#              --metrics extensive and prints each arm's time inside etcd's gRPC handler (the
#              rest is the JSON gateway, HTTP and the client)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-2000}"
rounds="${2:-5}"
source "$root/bench/lib.sh"
for b in etcd python3; do
  command -v "$b" >/dev/null || { echo "$b not found (apt-get install etcd-server python3)" >&2; exit 1; }
done

work="$(mktemp -d)"
data="${ETCD_DIR:-$work/etcd}"
etcd_pid=""
cleanup() {
  if [ -n "$etcd_pid" ]; then kill "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

explain="${EXPLAIN:-0}"
metrics=()
[ "$explain" = 1 ] && metrics=(--metrics extensive)
# shellcheck disable=SC2086  # ETCD_ARGS is a list of options
start_etcd "$data" "$work/etcd.log" "${metrics[@]}" ${ETCD_ARGS:-}

echo "writes=$n rounds=$rounds etcd=$(etcd --version | awk 'NR==1{print $3}') $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$port" "$n" "$rounds" "$explain" <<'EOF'
import base64, http.client, json, re, statistics, sys, time

port, n, rounds, explain = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
b64 = lambda s: base64.b64encode(s.encode()).decode()
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

def post(path, body):
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    reply = r.read()
    if r.status != 200:
        sys.exit(f"{path}: HTTP {r.status}: {reply[:200]!r}")
    return reply

fence, data, token = b64("bench/fence"), b64("bench/data"), b64("%020d" % 5)
put = lambda key: {"request_put": {"key": key, "value": token}}
# The guard's transaction with `writes` in its writing branch and `refusing` in the other. The
# token stays 5: after the first write each guarded one is the equal-token case.
guard = lambda *writes, refusing=(): ("/v3/kv/txn", json.dumps({
    "compare": [{"key": fence, "target": "VALUE", "result": "GREATER", "value": token}],
    **({"success": list(refusing)} if refusing else {}), "failure": list(writes)}))
arms = {"put": ("/v3/kv/put", json.dumps({"key": data, "value": token})),
        "guarded": guard(put(fence), put(data))}
if explain:
    arms["txn-put"] = ("/v3/kv/txn", json.dumps({"success": [put(data)]}))
    arms["txn-compare-put"] = guard(put(data))
    # The recipe before 2026-11-27: the refusing branch read the fence, never taken here.
    arms["guarded-reading"] = guard(put(fence), put(data), refusing=[{"request_range": {"key": fence}}])

def handler_seconds():
    """etcd's gRPC handling time so far, (seconds, calls) per method (--metrics extensive)."""
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    out = {}
    for method in ("Put", "Txn"):
        pick = lambda what: float(re.search(
            r'grpc_server_handling_seconds_%s\{grpc_method="%s"[^}]*\} (\S+)' % (what, method),
            body).group(1))
        out[method] = (pick("sum"), pick("count"))
    return out

def run(arm):
    path, body = arms[arm]
    method = "Put" if path.endswith("/put") else "Txn"
    before = handler_seconds()[method] if explain else None
    lat = []
    begin = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        reply = post(path, body)
        lat.append(time.perf_counter() - t)
    rate = n / (time.perf_counter() - begin)
    if arm == "guarded" and b'"succeeded":true' in reply:
        sys.exit("the guarded write was refused")
    inside = 0.0
    if explain:
        after = handler_seconds()[method]
        inside = (after[0] - before[0]) / (after[1] - before[1]) * 1e6
    return rate, statistics.median(lat) * 1e6, inside

for arm in arms:  # warm up the connection and every path
    post(*arms[arm])
results = {arm: [] for arm in arms}
for r in range(rounds):
    order = list(arms) if r % 2 == 0 else list(reversed(arms))
    for arm in order:
        results[arm].append(run(arm))
    print("round %d: " % (r + 1) + "; ".join(
        "%s %.0f/s p50 %.0f us" % (arm, *results[arm][-1][:2]) for arm in arms))
med = lambda arm, i: statistics.median(x[i] for x in results[arm])
ratios = lambda arm: [p[0] / g[0] for p, g in zip(results["put"], results[arm])]
print("medians: put %.0f/s (p50 %.0f us)  guarded txn %.0f/s (p50 %.0f us)  "
      "ratio (put/guarded) %.2fx, same-round ratios %s" % (
          med("put", 0), med("put", 1), med("guarded", 0), med("guarded", 1),
          med("put", 0) / med("guarded", 0), " ".join("%.2f" % x for x in ratios("guarded"))))
if explain:
    for arm in arms:
        print("  %-16s %6.0f/s  time / put: %.2f (median of the rounds' ratios)  "
              "inside etcd's handler %4.0f us, outside %4.0f us" % (
                  arm, med(arm, 0), statistics.median(ratios(arm)), med(arm, 2),
                  1e6 / med(arm, 0) - med(arm, 2)))
EOF
