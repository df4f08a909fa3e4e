#!/usr/bin/env bash
# Durable fenced writes/s through HTTP (wrk) at 1 and 64 connections, beside nginx answering
# `return 200` on loopback, measured in the same run, ROUNDS times interleaved; medians printed.
# Usage: bench/http_bench.sh [seconds per run, default 8] [rounds, default 3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fenced="${FENCED:-$root/build/release/httpapi/fenced}"
secs="${1:-8}"
rounds="${2:-3}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# nginx, 1 worker, the baseline ceiling for an HTTP server on this machine.
nginx_port="$(free_port)"
mkdir -p "$work/nginx/logs" "$work/nginx/tmp"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/tmp;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$nginx_port; location / { return 200 "ok"; } }
}
CONF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)

"$fenced" --listen 127.0.0.1:0 --db "$work/bench.db" >"$work/fenced.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on" "$work/fenced.log" && break; sleep 0.05; done
fenced_url="$(grep -o 'http://[^ ]*' "$work/fenced.log" | head -n1)"
sleep 0.5

run() {  # run NAME CONNECTIONS URL [wrk args...]; prints "NAME rps p99_ms non2xx"
  local name="$1" conns="$2" url="$3"; shift 3
  local out
  local threads=2
  [ "$conns" -lt 2 ] && threads=1
  out="$(wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "$@" "$url")"
  local rps p99 bad
  rps="$(awk '/^Requests\/sec:/{print $2}' <<<"$out")"
  p99="$(awk '$1=="99%"{v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' <<<"$out")"
  bad="$(awk -F= '/^non_2xx=/{print $2}' <<<"$out")"
  echo "$name $rps $p99 ${bad:-0}"
}

results="$work/results"
for r in $(seq "$rounds"); do
  run nginx_c64 64 "http://127.0.0.1:$nginx_port/" >>"$results"
  run fenced_c1 1 "$fenced_url" -s "$root/bench/put.lua" >>"$results"
  run fenced_c64 64 "$fenced_url" -s "$root/bench/put.lua" >>"$results"
  echo "round $r done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
printf "%-12s %12s %10s %8s\n" "run" "req/s" "p99 ms" "non-2xx"
for name in nginx_c64 fenced_c1 fenced_c64; do
  rps="$(awk -v n="$name" '$1==n{print $2}' "$results" | median)"
  p99="$(awk -v n="$name" '$1==n{print $3}' "$results" | median)"
  bad="$(awk -v n="$name" '$1==n{s+=$4} END{print s+0}' "$results")"
  printf "%-12s %12.0f %10.2f %8d\n" "$name" "$rps" "$p99" "$bad"
  eval "rps_$name=$rps"
done
awk -v f="$rps_fenced_c64" -v n="$rps_nginx_c64" 'BEGIN{printf "fenced/nginx at 64 connections: %.3f\n", f/n}'
curl -s "$fenced_url/metrics" | awk '/^fenced_commit_batch_size_(sum|count)/{v[$1]=$2} END{if (v["fenced_commit_batch_size_count"]>0) printf "mean writes per commit: %.1f\n", v["fenced_commit_batch_size_sum"]/v["fenced_commit_batch_size_count"]}'
