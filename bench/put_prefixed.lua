-- wrk script for bench/pg_bench.sh: bench/put.lua with its lock names and keys under a prefix
-- of their own, BENCH_PREFIX (default "p-"). Two wrk with different prefixes then write through
-- two fenced on one database without sharing a lock or a key: thread N holds lock
-- "<prefix>bench-holder-N" (token N + 1, or BENCH_TOKEN_<N>) and writes keys
-- "<prefix>bench-N-0" .. "<prefix>bench-N-4095". Failures are wrk's own count, as with put.lua.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "put.lua")

local put_init = init
function init(args)
  put_init(args)
  local p = os.getenv("BENCH_PREFIX") or "p-"
  prefix = "/v1/objects/" .. p .. "bench-" .. id .. "-"
  wrk.headers["Fencing-Lock"] = p .. "bench-holder-" .. id
end
