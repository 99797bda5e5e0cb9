package redis

// luaLimits reads and writes bucket hashes, for the acquire and delta
// scripts: one HMGET to read a bucket, one HSET and one PEXPIRE to write
// it, once per call whatever the number of requests in the call. A bucket's hash holds, for each limit, its parameters ("p|name"),
// its number ("v|name") and, for a refilling limit, its anchor ("a|name")
// (storedFields); and "r", the latest acquire's time; "cu", how many of
// its concurrency limits hold tokens; "dl", the latest instant (ms) at
// which one of its refilling limits is full again, as far as the writes
// know. The hash expires the bucket TTL after dl, and never while cu > 0:
// a missing bucket is a full one, so the expiry must not come before
// every limit is full again.
//
// dl is estimated in doubles (the anchor plus the excess over the refill
// amount): it is rounded up by a relative 10^-12 and 1 ms, far above the
// doubles' error of about 10^-15, so it is never early; it only times the
// expiry, never a verdict.
//
// Plain numbers (luaNum) go to Redis as numbers: Redis prints a number
// argument with "%.17g" (7.0) or as an integer when it is one (7.2 and
// Valkey), both exact for integers below 2^53 (and none is -0).
const luaLimits = `
-- The buckets a call has read, by key, in the order first read: a call
-- reads a bucket once and writes it once (b_flush), however many of its
-- requests touch it with the same limits. And the bucket index new
-- buckets go into (nil: none are made) and the bucket TTL, set by the
-- script before its first write. A library's functions share these, so
-- every script begins with b_reset.
local B, Border, b_idx, b_ttl
local function b_reset() B, Border, b_idx, b_ttl = {}, {}, nil, 0 end
local b_flushone
-- b_load returns bucket key's state for its limits names: st.vals holds
-- "r", "dl", "cu" and then, for the i-th limit, its parameters, number and
-- anchor at 3i + 1, 3i + 2, 3i + 3 (strings as stored, numbers as written
-- by this call; false if absent). A bucket without "r" is new (fresh). A
-- bucket read earlier in the call for the same limits is not read again;
-- for other limits, it is written and read again.
local function b_load(key, names)
  local st = B[key]
  if st and st.names == names then return st end -- a repeat's
  if st then
    local same = #st.names == #names
    for i = 1, #names do same = same and st.names[i] == names[i] end
    if same then return st end
    b_flushone(st)
  end
  local vals
  if #names == 1 then
    local n = names[1]
    vals = redis.call('HMGET', key, 'r', 'dl', 'cu', 'p|' .. n, 'v|' .. n, 'a|' .. n)
  else
    local fields = {'r', 'dl', 'cu'}
    for _, n in ipairs(names) do
      fields[#fields + 1] = 'p|' .. n
      fields[#fields + 1] = 'v|' .. n
      fields[#fields + 1] = 'a|' .. n
    end
    vals = redis.call('HMGET', key, unpack(fields))
  end
  local r, dl, cu = tonumber(vals[1] or '0'), tonumber(vals[2] or '0'), tonumber(vals[3] or '0')
  st = {key = key, names = names, vals = vals, fresh = not vals[1], r = r, dl = dl, cu = cu, r0 = r, dl0 = dl, cu0 = cu,
    dirty = {}, member = false}
  if not B[key] then Border[#Border + 1] = key end
  B[key] = st
  return st
end
-- b_write records x as the number of the i-th limit of st, anchored at
-- anchor for a refilling limit (refill amount amount, a double: 0 for a
-- concurrency limit), with its parameters sig when the limit is new: a
-- concurrency limit changes the count of those holding tokens, a
-- refilling one the instant the bucket is full again. A calendar quota's
-- anchor is a window's index, and base a Unix ms in that window or later:
-- it is full again at most k windows of at most its span after base, k
-- the windows its excess needs.
-- B_SPANS bounds the length of a calendar window in ms, by unit
-- (calendar.Window.MaxMillis).
local B_SPANS = {hour = 5400000, day = 93600000, week = 612000000, month = 2685600000}
-- b_span returns the bound of a window's length of a calendar quota's
-- parameters sig ("3000/3000/1/day@Europe/Berlin"), nil for other limits.
local function b_span(sig)
  if not sig or not string.find(sig, '@', 1, true) then return nil end
  return B_SPANS[string.match(sig, '^[^/]*/[^/]*/[^/]*/(%a+)@')]
end
local function b_write(st, i, sig, x, amount, anchor, base)
  local vals = st.vals
  if type(x) ~= 'number' then x = n_format(x) end
  if amount == 0 then
    local old = vals[3 * i + 2]
    local was = old and n_sign(n_parse(old)) > 0
    local is = n_sign(x) > 0
    if was and not is then st.cu = st.cu - 1 elseif is and not was then st.cu = st.cu + 1 end
  else
    local q = tonumber(x) / amount
    local k = math.ceil(q + math.abs(q) * 1e-12)
    local full
    local span = b_span(sig or vals[3 * i + 1])
    if span then
      if k < 0 then k = 0 end
      full = base + k * span + 1
    else
      full = anchor + k + 1
    end
    if full > st.dl then st.dl = full end
    vals[3 * i + 3] = anchor
  end
  vals[3 * i + 2] = x
  if sig then
    vals[3 * i + 1] = sig
    st.dirty[i] = 2
  elseif not st.dirty[i] then
    st.dirty[i] = 1
  end
end
-- b_touch records now as the bucket's time if it is later than "r".
local function b_touch(st, now)
  if now > st.r then st.r = now end
end
-- b_flushone writes what the call changed in bucket st in one HSET, adds
-- a new bucket to the bucket index, and sets its expiry (ttl after it is
-- full again).
b_flushone = function(st)
  local set, vals = {}, st.vals
  for i, name in ipairs(st.names) do
    local dirty = st.dirty[i]
    if dirty then
      -- 2: a new limit, written with its parameters
      if dirty == 2 then set[#set + 1] = 'p|' .. name; set[#set + 1] = vals[3 * i + 1] end
      set[#set + 1] = 'v|' .. name; set[#set + 1] = vals[3 * i + 2]
      if vals[3 * i + 3] then set[#set + 1] = 'a|' .. name; set[#set + 1] = vals[3 * i + 3] end
    end
  end
  if st.r ~= st.r0 then set[#set + 1] = 'r'; set[#set + 1] = st.r end
  if st.dl ~= st.dl0 then set[#set + 1] = 'dl'; set[#set + 1] = st.dl end
  if st.cu ~= st.cu0 then set[#set + 1] = 'cu'; set[#set + 1] = st.cu end
  if #set == 0 then return end
  redis.call('HSET', st.key, unpack(set))
  if st.fresh and st.member and b_idx then redis.call('ZADD', b_idx, 0, st.member) end
  if st.cu > 0 or st.dl + b_ttl > 9e15 then
    redis.call('PERSIST', st.key)
  else
    -- relative to the writer's clock, not the server's: the limiter's
    -- clock decides when a bucket is full
    local left = st.dl - st.r
    if left < 0 then left = 0 end
    redis.call('PEXPIRE', st.key, left + b_ttl + 1)
  end
  st.fresh, st.r0, st.dl0, st.cu0, st.dirty = false, st.r, st.dl, st.cu, {}
end
-- b_flush writes every bucket the call changed (b_flushone).
local function b_flush()
  for _, key in ipairs(Border) do b_flushone(B[key]) end
end
`
