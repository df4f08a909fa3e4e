#!lua name=fencekit
-- fencekit's guard for Redis 7 (a function library), for data kept in your own Redis:
--   redis-cli -x FUNCTION LOAD REPLACE < fencekit.lua
-- docs/guard-in-your-database.md ("Redis") says how to call it, and what persistence and
-- replication the guarantee needs.
--
-- A fence key holds the highest fencing token accepted for one lock, as a decimal string.
--   FCALL fencekit_advance 1 FENCE TOKEN            raise the fence to TOKEN
--   FCALL fencekit_set 2 FENCE DATA TOKEN VALUE     the same, then SET DATA VALUE
--   FCALL fencekit_del 2 FENCE DATA TOKEN           the same, then DEL DATA
-- A token >= the fence is accepted (equal: one holder may write many times under one grant):
-- the reply is the fence's new value, a bulk string. A lower token is refused with an error
-- reply whose code is FENCE, naming the highest token:
--   FENCE stale token 4 for fence key "x": the highest is 7
-- A bad call (a key or argument missing or extra, a token that is not a decimal integer in
-- 1..2^63-1 written without sign or leading zeros, a fence key that is not 1 to 1024 bytes
-- without control characters (fencekit's names), the fence and data keys the same, a fence key
-- holding something else) is refused with an error starting "ERR fencekit:". A refused call
-- changes nothing: every check runs before the first write.
--
-- Tokens are compared as decimal strings (length, then digit by digit), never as Lua numbers:
-- those are doubles, which cannot tell 2^53 from 2^53+1.
--
-- In a cluster, the fence and data keys must share a hash slot: give them one hash tag, e.g.
-- {order-1}fence and {order-1}data. No function declares no-writes, so Redis refuses them on a
-- read-only replica and, under maxmemory, before they run.

local MAX_TOKEN = '9223372036854775807' -- 2^63-1, the lock services' largest token

-- true when s is a token: a canonical decimal integer in 1..2^63-1.
local function is_token(s)
  if type(s) ~= 'string' or not s:match('^[1-9]%d*$') then return false end
  if #s ~= #MAX_TOKEN then return #s < #MAX_TOKEN end
  return s <= MAX_TOKEN
end

-- a < b for tokens, digit by digit (string < would use the locale's collation).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return false
end

-- A key name for an error line: quoted, control characters, quotes and backslashes escaped.
local function quoted(key)
  return '"' .. key:gsub('[%c"\\\128-\255]', function(c)
    return string.format('\\x%02x', c:byte())
  end) .. '"'
end

local function bad(message)
  return redis.error_reply('ERR fencekit: ' .. message)
end

-- Checks the call's shape and its token; nil, or the error reply.
local function check(name, keys, args, nkeys, nargs)
  if #keys ~= nkeys then
    return bad(string.format('%s takes %d key(s), got %d', name, nkeys, #keys))
  end
  if #args ~= nargs then
    return bad(string.format('%s takes %d argument(s), got %d', name, nargs, #args))
  end
  if #keys[1] < 1 or #keys[1] > 1024 or keys[1]:find('[%z\1-\31\127]') then
    return bad('the fence key must be 1 to 1024 bytes without control characters')
  end
  if not is_token(args[1]) then
    return bad('the token must be a decimal integer in 1..' .. MAX_TOKEN ..
               ' (no sign, no leading zeros)')
  end
  if nkeys == 2 and keys[1] == keys[2] then
    return bad('the fence key and the data key must differ')
  end
  return nil
end

-- Raises the fence keys[1] to token, or returns the error reply that refuses it (nothing
-- written). A fence key of another type raises WRONGTYPE, before anything is written.
local function advance(fence, token)
  local highest = redis.call('GET', fence)
  if highest then
    if not is_token(highest) then
      return bad('the fence key ' .. quoted(fence) .. ' does not hold a token')
    end
    if less(token, highest) then
      return redis.error_reply(string.format(
        'FENCE stale token %s for fence key %s: the highest is %s',
        token, quoted(fence), highest))
    end
    if highest == token then return nil end
  end
  redis.call('SET', fence, token)
  return nil
end

redis.register_function{
  function_name = 'fencekit_advance',
  callback = function(keys, args)
    local err = check('fencekit_advance', keys, args, 1, 1) or advance(keys[1], args[1])
    if err then return err end
    return args[1]
  end,
}

redis.register_function{
  function_name = 'fencekit_set',
  callback = function(keys, args)
    local err = check('fencekit_set', keys, args, 2, 2) or advance(keys[1], args[1])
    if err then return err end
    redis.call('SET', keys[2], args[2])
    return args[1]
  end,
}

redis.register_function{
  function_name = 'fencekit_del',
  callback = function(keys, args)
    local err = check('fencekit_del', keys, args, 2, 1) or advance(keys[1], args[1])
    if err then return err end
    redis.call('DEL', keys[2])
    return args[1]
  end,
}
