-- wrk script for bench/scale_bench.sh, locks: durable PUTs spread over SCALE_LOCKS locks.
--
-- The store holds SCALE_LOCK_KEYS keys (default 100000; bench/scale_bench.sh loads them), key i
-- ("l" and i in 6 digits) made under lock "lock-(i % SCALE_LOCKS)" (6 digits too) with token 1,
-- and every one of those locks has its fence at token 1. Each request PUTs a key chosen uniformly
-- at random with its own lock's header (Fencing-Lock) and token 1: with many locks nearly every
-- request carries another lock than the one before, and a group commit holds about as many locks
-- as writes; with 10 locks, it holds at most 10. Formatted per request; no response() callback.
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  locks = tonumber(os.getenv("SCALE_LOCKS") or "")
  keys = tonumber(os.getenv("SCALE_LOCK_KEYS") or "100000")
  if locks == nil or locks < 1 then error("scale_locks.lua: set SCALE_LOCKS to the number of locks") end
  math.randomseed(os.time() + 104729 * id)
  value = string.rep("v", 100)
  headers = {["Fencing-Token"] = "1", ["Content-Type"] = "application/octet-stream"}
end

function request()
  local i = math.random(keys) - 1
  headers["Fencing-Lock"] = string.format("lock-%06d", i % locks)
  return wrk.format("PUT", string.format("/v1/objects/l%06d", i), headers, value)
end
