-- wrk script for bench/http_bench.sh: durable fenced writes through fenced.
--
-- Each wrk thread is one lock holder: it holds lock "bench-holder-N" with a fixed fencing token
-- (N + 1) and writes many keys under that one grant. fenced accepts a token equal to the
-- highest it has accepted, so every request is a real, accepted, fsynced write. The key varies
-- per request (4,096 keys per thread, so the table stays small while most writes replace a
-- value).
--
-- The load generator shares the machine with the server, so it is kept as light as wrk is
-- against nginx: each thread formats its 4,096 requests once, and there is no response()
-- callback (which makes wrk hand every answer's headers to Lua). Failures are wrk's own count,
-- "Non-2xx or 3xx responses" (every answer with a status of 400 or more), and its socket errors.
--
-- bench/verify_bench.sh gives each thread a real grant instead: BENCH_TOKEN_<N> (the token of
-- lock "bench-holder-N") and BENCH_SERVICE (sent as Fencing-Service).
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  counter = 0
  prefix = "/v1/objects/bench-" .. id .. "-"
  wrk.method = "PUT"
  wrk.body = string.rep("v", 100)
  wrk.headers["Fencing-Lock"] = "bench-holder-" .. id
  wrk.headers["Fencing-Token"] = os.getenv("BENCH_TOKEN_" .. id) or tostring(id + 1)
  local service = os.getenv("BENCH_SERVICE")
  if service ~= nil and service ~= "" then wrk.headers["Fencing-Service"] = service end
  wrk.headers["Content-Type"] = "application/octet-stream"
end

function request()
  -- Formatted on the first call, once init (and a script built on this one, as
  -- put_prefixed.lua) has set the prefix and the headers.
  if requests == nil then
    requests = {}
    for k = 0, 4095 do requests[k] = wrk.format(nil, prefix .. k) end
  end
  counter = (counter + 1) % 4096
  return requests[counter]
end
