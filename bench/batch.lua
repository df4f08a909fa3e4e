-- wrk script for bench/http_bench.sh: durable fenced writes in batches (POST /v1/batch).
--
-- As bench/put.lua, each wrk thread is one lock holder ("bench-holder-N", token N + 1) writing
-- keys of its own (4,096 per thread, 100-byte values), but each request is one batch of
-- BENCH_BATCH puts (default 16) under that grant, applied all or none in one transaction. A
-- request thus carries BENCH_BATCH writes: writes/s = requests/s x BENCH_BATCH. Any answer other
-- than 200 is counted as a failure and printed by done().
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
  size = tonumber(os.getenv("BENCH_BATCH") or "16")
  head = string.format('{"lock":"bench-holder-%d","token":%d,"writes":[', id, id + 1)
  item = '{"op":"put","key":"bench-' .. id .. '-%d","value":"' .. string.rep("v", 100) .. '"}'
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local writes = {}
  for i = 1, size do
    counter = counter + 1
    writes[i] = string.format(item, counter % 4096)
  end
  return wrk.format(nil, "/v1/batch", nil, head .. table.concat(writes, ",") .. "]}")
end

function response(status, headers, body)
  if status ~= 200 then
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
