# Shared by the bench/*.sh scripts. Sourced, not run.

# find_lock_bench: prints the lock_bench binary: $LOCK_BENCH, else the most recently built of
# build/{bench,lockbench}/bench/lock_bench and build/release/bench/lock_bench; fails with the
# commands that build it.
find_lock_bench() {
  local root="$1" bench="${LOCK_BENCH:-}" b
  if [ -z "$bench" ]; then
    for b in "$root/build/bench/bench/lock_bench" "$root/build/lockbench/bench/lock_bench" \
        "$root/build/release/bench/lock_bench"; do
      if [ -x "$b" ] && { [ -z "$bench" ] || [ "$b" -nt "$bench" ]; }; then bench="$b"; fi
    done
  fi
  if [ -z "$bench" ] || [ ! -x "$bench" ]; then
    echo "lock_bench not built; e.g.:" >&2
    echo "  cmake -S . -B build/lockbench -G Ninja -DCMAKE_BUILD_TYPE=Release -DFENCEKIT_BUILD_TESTS=OFF" >&2
    echo "  cmake --build build/lockbench --target lock_bench" >&2
    return 1
  fi
  echo "$bench"
}

# median: the median of the numbers on stdin, one per line (0 when there are none).
median() {
  sort -g | awk '{a[NR]=$1} END{if (NR==0) print 0; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

# free_port: prints a loopback port nobody listens on at the moment of the call.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
