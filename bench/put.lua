-- wrk script: durable fenced writes. Each wrk thread is one lock holder writing many keys under
-- one grant (token 1, accepted again and again), so every request is a real accepted write.
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  rejected = 0
  wrk.method = "PUT"
  wrk.body = string.rep("v", 100)
  wrk.headers["Fencing-Token"] = "1"
  wrk.headers["Content-Type"] = "application/octet-stream"
end

function request()
  counter = counter + 1
  return wrk.format(nil, "/v1/objects/bench-" .. id .. "-" .. (counter % 4096))
end

function response(status, headers, body)
  if status ~= 200 and status ~= 201 then rejected = rejected + 1 end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("rejected") end
  io.write(string.format("non_2xx=%d\n", bad))
end
