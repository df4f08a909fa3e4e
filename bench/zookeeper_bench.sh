#!/usr/bin/env bash
# ZooKeeper lock cycles/s: fencekit's zk:// backend (TryAcquire + Release) beside the same lock
# recipe made with raw C client calls (create an ephemeral sequential znode, list the line,
# delete it), against one loopback ZooKeeper server (Debian's zookeeper package) started here.
# Each round is one `lock_bench zk-paired` run, which takes the two in turns of 20 cycles, so
# both see the same server; medians and same-round ratios printed. Figures: docs/benchmarks.md.
#
# Usage: bench/zookeeper_bench.sh [seconds per run, default 4] [rounds, default 5]
# Environment:
#   LOCK_BENCH  the lock_bench binary (default: as bench/etcd_bench.sh)
#   ZK_DIR      where ZooKeeper keeps its data and transaction log (default: a temp folder).
#               Its fsync cost sets the rate: keep it on the disk you mean to measure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-4}"
rounds="${2:-5}"

source "$root/bench/lib.sh"
bench="$(find_lock_bench "$root")"
jars=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-api.jar
[ -f /usr/share/java/zookeeper.jar ] || { echo "ZooKeeper not found (apt-get install zookeeper)" >&2; exit 1; }

work="$(mktemp -d)"
data="${ZK_DIR:-$work/zk}"
zk_pid=""
cleanup() {
  stop_pids ${zk_pid:+"$zk_pid"}
  rm -rf "$work"
}
on_exit cleanup

# One standalone server: port, data folder, tickTime 2000 (sessions of 4-40 s), as zoo.cfg's
# sample has it.
port="$(free_port)"
mkdir -p "$data"
java -Xmx256m -cp "$jars" org.apache.zookeeper.server.ZooKeeperServerMain "$port" "$data" 2000 \
  >"$work/zk.log" 2>&1 &
zk_pid=$!
ok=0
for _ in $(seq 400); do
  # srvr: the one four-letter word ZooKeeper 3.8 answers by default.
  # A member still starting may take the connection and never answer: each probe is bounded.
  if timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && grep -q "^Mode:" <&3' \
      _ "$port" 2>/dev/null; then
    ok=1
    break
  fi
  sleep 0.05
done
[ "$ok" -eq 1 ] || { echo "ZooKeeper did not start:" >&2; tail -20 "$work/zk.log" >&2; exit 1; }

results="$work/results"  # lines: NAME ROUND PER_SECOND P50_US
record() {
  local line="$2"
  [ -n "$line" ] || line="x 0"
  awk -v n="$1" -v r="$round" '{p50=0; for (i=3;i<=NF;++i) if ($i ~ /^p50_us=/) {p50=substr($i,8)}
    print n, r, $2+0, p50; exit}' <<<"$line" >>"$results"
}

echo "== zookeeper_bench: $bench; $(basename "$(readlink -f /usr/share/java/zookeeper.jar)"); $secs s x $rounds rounds; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$rounds"); do
  pair="$("$bench" zk-paired "$port" "$secs")"
  record zk_floor "$(grep '^zk-floor ' <<<"$pair")"
  record fencekit_zk "$(grep '^cycle ' <<<"$pair")"
  echo "round $round done: $(awk -v r="$round" '$2==r {printf "%s=%s ", $1, $3}' "$results")" >&2
done

med() { awk -v n="$1" -v c="${2:-3}" '$1==n{print $c}' "$results" | median; }
ratio="$(awk '$1=="fencekit_zk"{x[$2]=$3} $1=="zk_floor"{y[$2]=$3}
  END{for (r in x) if (y[r] > 0) print x[r]/y[r]}' "$results" | median)"
echo
printf "%-24s %10s %8s\n" "medians of $rounds rounds" "cycles/s" "p50 us"
for name in zk_floor fencekit_zk; do
  printf "%-24s %10.0f %8s\n" "$name" "$(med "$name")" "$(med "$name" 4)"
done
awk -v r="$ratio" 'BEGIN{printf "fencekit zk / raw C client cycle: %.2f (same-round median) target >= 0.90: %s\n",
  r, (r >= 0.9 ? "met" : "MISSED")}'
