package redis

// luaLimits writes limits of a bucket hash, for the acquire and delta
// scripts. A bucket's hash holds, besides each limit's parameters
// ("p|name") and number ("v|name"): "r", the latest acquire's time; "cu",
// how many of its concurrency limits hold tokens; "dl", the latest instant
// (ms) at which one of its refilling limits is full again, as far as the
// writes know. The hash expires the bucket TTL after dl, and never while
// cu > 0: a missing bucket is a full one, so the expiry must not come
// before every limit is full again.
//
// dl is estimated in doubles (the full tick over the refill amount): it
// is rounded up by a relative 10^-12 and 1 ms, far above the doubles'
// error of about 10^-15, so it is never early; it only times the expiry,
// never a verdict.
const luaLimits = `
-- l_write stores nv as limit name's number (with its parameters sig when
-- the limit is new) and returns the change in the count of concurrency
-- limits holding tokens, and the instant the limit is full again (nil for
-- a concurrency limit).
local function l_write(key, name, sig, old, missing, nv, amount)
  if sig then
    redis.call('HSET', key, 'p|' .. name, sig, 'v|' .. name, w_format(nv))
  else
    redis.call('HSET', key, 'v|' .. name, w_format(nv))
  end
  if amount == 0 then
    local was = (not missing) and w_sign(old) > 0
    local is = w_sign(nv) > 0
    if was == is then return 0, nil end
    if is then return 1, nil end
    return -1, nil
  end
  local x = w_approx(nv) / amount
  return 0, math.ceil(x + math.abs(x) * 1e-12) + 1
end
-- l_settle records a write's changes to cu and dl and the time now (when
-- later than "r"), and sets the hash's expiry.
local function l_settle(key, now, ttl, cu, dl)
  if cu ~= 0 then redis.call('HINCRBY', key, 'cu', cu) end
  if now then
    local r = tonumber(redis.call('HGET', key, 'r') or '0')
    if now > r then redis.call('HSET', key, 'r', string.format('%.0f', now)) else now = r end
  else
    now = tonumber(redis.call('HGET', key, 'r') or '0')
  end
  local old = tonumber(redis.call('HGET', key, 'dl') or '0')
  if dl ~= nil and dl > old then
    redis.call('HSET', key, 'dl', string.format('%.0f', dl))
  else
    dl = old
  end
  if tonumber(redis.call('HGET', key, 'cu') or '0') > 0 or dl + ttl > 9e15 then
    redis.call('PERSIST', key)
  else
    -- relative to the writer's clock, not the server's: the limiter's
    -- clock decides when a bucket is full
    local left = dl - now
    if left < 0 then left = 0 end
    redis.call('PEXPIRE', key, string.format('%.0f', left + ttl + 1))
  end
end
`
