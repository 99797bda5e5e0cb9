package redis

// luaLimits reads and writes bucket hashes, for the acquire and delta
// scripts: one HMGET to read a bucket, one HSET and one PEXPIRE to write
// it. A bucket's hash holds, besides each limit's parameters
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
-- b_load reads, in one HMGET, what the scripts need of bucket key and of
-- its limits names: "r", "dl", "cu", and each limit's parameters and
-- number. A bucket without "r" is new.
local function b_load(key, names)
  local fields = {'r', 'dl', 'cu'}
  for _, n in ipairs(names) do
    fields[#fields + 1] = 'p|' .. n
    fields[#fields + 1] = 'v|' .. n
  end
  local vals = redis.call('HMGET', key, unpack(fields))
  local st = {key = key, fresh = not vals[1], r = tonumber(vals[1] or '0'), dl = tonumber(vals[2] or '0'),
    cu = tonumber(vals[3] or '0'), p = {}, v = {}, set = {}, newdl = nil}
  st.cu0, st.r0, st.dl0 = st.cu, st.r, st.dl
  for i, n in ipairs(names) do
    st.p[n] = vals[2 + 2 * i] or nil
    st.v[n] = vals[3 + 2 * i] or nil
  end
  return st
end
-- b_write records nv as limit name's number (with its parameters sig when
-- the limit is new): a concurrency limit (amount 0) changes the count of
-- those holding tokens, a refilling one the instant the bucket is full
-- again.
local function b_write(st, name, sig, nv, amount)
  local s = w_format(nv)
  st.set[#st.set + 1] = 'v|' .. name
  st.set[#st.set + 1] = s
  if sig then
    st.set[#st.set + 1] = 'p|' .. name
    st.set[#st.set + 1] = sig
  end
  if amount == 0 then
    local was = st.v[name] ~= nil and w_sign(w_parse(st.v[name])) > 0
    local is = w_sign(nv) > 0
    if was and not is then st.cu = st.cu - 1 elseif is and not was then st.cu = st.cu + 1 end
  else
    local x = tonumber(s) / amount
    local full = math.ceil(x + math.abs(x) * 1e-12) + 1
    if full > st.dl then st.dl = full end
  end
  st.v[name] = s
  if sig then st.p[name] = sig end
end
-- b_save writes what b_write recorded, the time now if later than "r"
-- (nil: keep "r"), and sets the hash's expiry.
local function b_save(st, now, ttl)
  local set = st.set
  if now and now > st.r then
    st.r = now
    set[#set + 1] = 'r'; set[#set + 1] = string.format('%.0f', now)
  end
  if st.dl ~= st.dl0 then set[#set + 1] = 'dl'; set[#set + 1] = string.format('%.0f', st.dl) end
  if st.cu ~= st.cu0 then set[#set + 1] = 'cu'; set[#set + 1] = string.format('%.0f', st.cu) end
  if #set == 0 then return end
  redis.call('HSET', st.key, unpack(set))
  st.set = {}
  st.cu0, st.r0, st.dl0 = st.cu, st.r, st.dl
  if st.cu > 0 or st.dl + ttl > 9e15 then
    redis.call('PERSIST', st.key)
  else
    -- relative to the writer's clock, not the server's: the limiter's
    -- clock decides when a bucket is full
    local left = st.dl - st.r
    if left < 0 then left = 0 end
    redis.call('PEXPIRE', st.key, string.format('%.0f', left + ttl + 1))
  end
end
`
