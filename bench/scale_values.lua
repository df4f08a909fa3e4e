-- wrk script for bench/scale_bench.sh, values: durable PUTs of SCALE_SIZE-byte values.
--
-- Each wrk thread is one lock holder ("value-holder-N", token 1) replacing the values of 16 keys
-- of its own ("v<size>-N-0" .. "v<size>-N-15"), so the store stays small whatever the size while
-- every write replaces a value. The value is random letters and digits (incompressible enough that
-- neither PostgreSQL's TOAST compression nor anything else shrinks it), drawn once per thread, in
-- two versions (the second the first rotated by half its length) that each key takes in turn: a
-- write never stores the bytes its key holds already (SQLite leaves a page whose bytes a write
-- does not change unwritten, so the same value again would cost it next to nothing). The 32
-- requests are formatted once, and there is no response() callback: failures are wrk's
-- "Non-2xx or 3xx responses" and its socket errors.
local next_id = 0
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

-- random_text(n): n random letters and digits.
function random_text(n)
  local chars = {}
  for i = 1, n do
    local r = math.random(#alphabet)
    chars[i] = string.sub(alphabet, r, r)
  end
  return table.concat(chars)
end

function init(args)
  local size = tonumber(os.getenv("SCALE_SIZE") or "")
  if size == nil or size < 2 then error("scale_values.lua: set SCALE_SIZE to the value size in bytes") end
  math.randomseed(1 + id)
  local value = random_text(size)
  local half = math.floor(size / 2)
  local values = {[0] = value, [1] = string.sub(value, half + 1) .. string.sub(value, 1, half)}
  local headers = {
    ["Fencing-Lock"] = "value-holder-" .. id,
    ["Fencing-Token"] = "1",
    ["Content-Type"] = "application/octet-stream",
  }
  -- Request i writes key i % 16 with version (i / 16) % 2 of the value.
  requests = {}
  for i = 0, 31 do
    local path = string.format("/v1/objects/v%d-%d-%d", size, id, i % 16)
    requests[i] = wrk.format("PUT", path, headers, values[math.floor(i / 16)])
  end
  counter = 0
end

function request()
  counter = (counter + 1) % 32
  return requests[counter]
end
