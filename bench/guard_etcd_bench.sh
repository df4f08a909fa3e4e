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

# shellcheck disable=SC2086  # ETCD_ARGS is a list of options
start_etcd "$data" "$work/etcd.log" ${ETCD_ARGS:-}

echo "writes=$n rounds=$rounds etcd=$(etcd --version | awk 'NR==1{print $3}') $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$port" "$n" "$rounds" <<'EOF'
import base64, http.client, json, statistics, sys, time

port, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
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
plain = json.dumps({"key": data, "value": b64("v")})
# The token stays 5: after the first write each guarded one is the equal-token case.
guarded = json.dumps({
    "compare": [{"key": fence, "target": "VALUE", "result": "GREATER", "value": token}],
    "success": [{"request_range": {"key": fence}}],
    "failure": [{"request_put": {"key": fence, "value": token}},
                {"request_put": {"key": data, "value": b64("v")}}]})
arms = {"put": ("/v3/kv/put", plain), "guarded": ("/v3/kv/txn", guarded)}

def run(arm):
    path, body = arms[arm]
    lat = []
    begin = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        reply = post(path, body)
        lat.append(time.perf_counter() - t)
    rate = n / (time.perf_counter() - begin)
    if arm == "guarded" and b'"succeeded":true' in reply:
        sys.exit("the guarded write was refused")
    return rate, statistics.median(lat) * 1e6

for arm in arms:  # warm up the connection and both paths
    post(*arms[arm])
results = {arm: [] for arm in arms}
for r in range(rounds):
    order = ["put", "guarded"] if r % 2 == 0 else ["guarded", "put"]
    for arm in order:
        results[arm].append(run(arm))
    print("round %d: put %.0f/s p50 %.0f us; guarded %.0f/s p50 %.0f us" % (
        r + 1, *results["put"][-1], *results["guarded"][-1]))
med = lambda arm, i: statistics.median(x[i] for x in results[arm])
ratios = [p[0] / g[0] for p, g in zip(results["put"], results["guarded"])]
print("medians: put %.0f/s (p50 %.0f us)  guarded txn %.0f/s (p50 %.0f us)  "
      "ratio (put/guarded) %.2fx, same-round ratios %s" % (
          med("put", 0), med("put", 1), med("guarded", 0), med("guarded", 1),
          med("put", 0) / med("guarded", 0), " ".join("%.2f" % x for x in ratios)))
EOF
