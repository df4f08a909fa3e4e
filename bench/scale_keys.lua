-- wrk script for bench/scale_bench.sh, keys: writes and reads of random keys among the
-- SCALE_KEYS keys already stored (bench/scale_bench.sh loads them).
--
-- Key i is "k" and i in 8 digits (k00000000 .. k09999999), stored under lock "holder-(i % 2)"
-- with token 1 and a 100-byte value of "v". Each wrk thread (run with -t2) is one lock holder:
-- thread t holds lock "holder-t" with token 1 (fenced accepts a token equal to the highest it
-- accepted), so every PUT is a real, accepted, fsynced write. Its keys are i = 2j + t, j chosen
-- uniformly at random: the two threads together pick uniformly among all stored keys. One request
-- in ten is a GET of such a key, the rest PUTs of a new 100-byte value: writes/s = 0.9 x
-- requests/s (to within the connections' requests in flight when the run ends).
--
-- The keys are too many to format every request once (as bench/put.lua does): each is formatted
-- when sent. There is no response() callback; failures are wrk's own "Non-2xx or 3xx responses"
-- (every answer of 400 or more: a GET of a missing key would be one) and its socket errors.
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  local keys = tonumber(os.getenv("SCALE_KEYS") or "")
  if keys == nil or keys < 2 then error("scale_keys.lua: set SCALE_KEYS to the number of keys stored") end
  half = math.floor(keys / 2)
  counter = 0
  math.randomseed(os.time() + 7919 * id)
  value = string.rep("v", 100)
  put_headers = {
    ["Fencing-Lock"] = "holder-" .. id,
    ["Fencing-Token"] = "1",
    ["Content-Type"] = "application/octet-stream",
  }
  get_headers = {}
end

function request()
  counter = counter + 1
  local path = string.format("/v1/objects/k%08d", 2 * (math.random(half) - 1) + id)
  if counter % 10 == 0 then return wrk.format("GET", path, get_headers) end
  return wrk.format("PUT", path, put_headers, value)
end
