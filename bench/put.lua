-- wrk script for bench/http_bench.sh: durable fenced writes through fenced.
--
-- Each wrk thread is one lock holder: it holds lock "bench-holder-N" with a fixed fencing token
-- (N + 1) and writes many keys under that one grant. fenced accepts a token equal to the
-- highest it has accepted, so every request is a real, accepted, fsynced write. The key varies
-- per request (4,096 keys per thread, so the table stays small while most writes replace a
-- value). Any answer other than 200/201 is counted as a failure and printed by done().
--
-- bench/verify_bench.sh gives each thread a real grant instead: BENCH_TOKEN_<N> (the token of
-- lock "bench-holder-N") and BENCH_SERVICE (sent as Fencing-Service).
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  failed = 0
  last_bad_status = 0
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
  counter = counter + 1
  return wrk.format(nil, prefix .. (counter % 4096))
end

function response(status, headers, body)
  if status ~= 200 and status ~= 201 then
    failed = failed + 1
    last_bad_status = status
  end
end

function done(summary, latency, requests)
  local bad, last = 0, 0
  for _, t in ipairs(threads) do
    bad = bad + t:get("failed")
    if t:get("last_bad_status") ~= 0 then last = t:get("last_bad_status") end
  end
  io.write(string.format("non_2xx=%d\n", bad))
  if bad > 0 then io.write(string.format("last_bad_status=%d\n", last)) end
end
