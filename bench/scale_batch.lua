-- wrk script for bench/scale_bench.sh, values: batches (POST /v1/batch) of SCALE_BATCH puts
-- (default 8) of SCALE_SIZE-byte values each, under one grant.
--
-- As bench/scale_values.lua, each wrk thread is one lock holder ("value-holder-N", token 1) with
-- 16 keys of its own ("b<size>-N-0" ..), each batch putting SCALE_BATCH distinct ones, and the
-- value is random letters and digits drawn once per thread in two versions that each key takes
-- in turn (a write never stores the bytes its key holds already), sent as JSON strings ("value"
-- takes the text's bytes as they are, no base64 to inflate them). The 2 x 16 / SCALE_BATCH bodies
-- are formatted once; no response() callback. A request carries SCALE_BATCH writes: writes/s =
-- requests/s x SCALE_BATCH. fenced needs --max-body above SCALE_BATCH x SCALE_SIZE
-- (bench/scale_bench.sh sets and prints it).
-- setup() and random_text() are scale_values.lua's; init() and request() below replace its own.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "scale_values.lua")

function init(args)
  local size = tonumber(os.getenv("SCALE_SIZE") or "")
  local batch = tonumber(os.getenv("SCALE_BATCH") or "8")
  if size == nil or size < 2 then error("scale_batch.lua: set SCALE_SIZE to the value size in bytes") end
  if batch < 1 or 16 % batch ~= 0 then error("scale_batch.lua: SCALE_BATCH must divide 16") end
  math.randomseed(1001 + id)
  local value = random_text(size)
  local half = math.floor(size / 2)
  local values = {[0] = value, [1] = string.sub(value, half + 1) .. string.sub(value, 1, half)}
  local headers = {["Content-Type"] = "application/json"}
  local head = string.format('{"lock":"value-holder-%d","token":1,"writes":[', id)
  -- Body i puts keys of group i % (16 / batch) with version (i / (16 / batch)) % 2 of the value.
  local groups = 16 / batch
  requests = {}
  count = 2 * groups
  for i = 0, count - 1 do
    local g, v = i % groups, math.floor(i / groups)
    local writes = {}
    for w = 1, batch do
      local key = string.format("b%d-%d-%d", size, id, g * batch + w - 1)
      writes[w] = '{"op":"put","key":"' .. key .. '","value":"' .. values[v] .. '"}'
    end
    requests[i] = wrk.format("POST", "/v1/batch", headers, head .. table.concat(writes, ",") .. "]}")
  end
  counter = 0
end

function request()
  counter = (counter + 1) % count
  return requests[counter]
end
