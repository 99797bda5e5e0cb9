package redis

// luaConsume applies a batch of acquires, in order, each all or nothing
// (docs/redis.md, "The acquire script").
//
// KEYS[1] is the namespace's bucket index; KEYS[2..] are buckets.
// ARGV: the bucket TTL (ms), the number of requests, then for each
// request: the index in KEYS of its lease's hash (0: none; the lease
// indexes and the audit keys follow it in KEYS) and then ten values
// (reused id, now, the record's JSON, version, ended, keep-until, expiry,
// id, and the event's id and JSON), its number of buckets, and
// for each bucket its key's index in KEYS, its index member, its time and
// its number of limits, and for each limit eight values: name, parameters
// ("capacity/amount/period"), debit, cover, check ("1" or "0"), refill
// amount ("0" for a concurrency limit), and the floor and bound at the
// request's time (Go's, used unless the bucket's time is later).
//
// A bucket is decided at its time t: the request's, or its latest write's
// if later (time never runs backwards for a bucket). A refilling limit's
// floor is t·amount (its full tick when full at t) and its bound floor +
// cover, cover being (capacity − debit amount)·period; a concurrency
// limit's floor is 0 and its bound the cover, capacity − amount. An empty
// cover is never covered (an amount above the capacity). For every limit
// the stored number V (field "v|name"; a missing limit is full: V =
// floor) is first raised to the floor (the limit's state at t, refill
// included: f = max(V, floor)); a checked limit covers its debit if
// f <= bound. If every checked limit of every bucket covers, each
// limit is written f + debit (a missing limit's parameters with it).
// A limit stored with other parameters answers "reconfigure" and the
// request writes nothing: Go adopts the new parameters first.
//
// A request may carry a durable lease's record (store.ConsumeRequest.Lease),
// written, indexed and with its audit event in the same step as the debit;
// a record of its id that is open, or (for a reused id) a tombstone still
// kept, answers {4} and the request writes nothing.
//
// Each request's answer is {1 (granted) or 0 (refused), then for each
// bucket its time t and the f of each of its limits}, {2, the ordinal of
// the bucket to reconfigure} or {4}.
const luaConsume = luaWide + luaLimits + luaAppendEvent + `
local ttl = tonumber(ARGV[1])
local nreq = tonumber(ARGV[2])
local a = 3
local out = {}
for q = 1, nreq do
  local lease = nil
  local lk = tonumber(ARGV[a]); a = a + 1
  if lk > 0 then
    lease = {key = KEYS[lk], reused = ARGV[a] == '1', now = tonumber(ARGV[a + 1]), rec = ARGV[a + 2], ver = ARGV[a + 3],
      ended = ARGV[a + 4], keep = ARGV[a + 5], exp = ARGV[a + 6], id = ARGV[a + 7], ev = ARGV[a + 8], evjs = ARGV[a + 9]}
    a = a + 10
  end
  local nb = tonumber(ARGV[a]); a = a + 1
  local buckets = {}
  local ok = true
  local status = nil
  local observed = {}
  if lease then
    local have = redis.call('HMGET', lease.key, 'ended', 'keep')
    if have[1] and (have[1] == '0' or (lease.reused and tonumber(have[2]) > lease.now)) then status = {4} end
  end
  for b = 1, nb do
    local key = KEYS[tonumber(ARGV[a])]
    local bk = {key = key, member = ARGV[a + 1], now = tonumber(ARGV[a + 2]), limits = {}}
    local nl = tonumber(ARGV[a + 3]); a = a + 4
    local names = {}
    for l = 1, nl do names[l] = ARGV[a + 8 * (l - 1)] end
    local st = b_load(key, names)
    bk.st = st
    -- time never runs backwards for a bucket: a request dated before its
    -- latest write is decided at that write's time
    local later = st.r > bk.now
    local t = nil
    if later then
      bk.now = st.r
      t = w_parse(string.format('%.0f', bk.now))
    end
    if status == nil then observed[#observed + 1] = string.format('%.0f', bk.now) end
    for l = 1, nl do
      local lim = {name = ARGV[a], sig = ARGV[a + 1], debit = w_parse(ARGV[a + 2]), check = ARGV[a + 4] == '1', amount = tonumber(ARGV[a + 5])}
      local cover = ARGV[a + 3]
      if not later then
        -- the request's time: Go computed the floor and the bound
        lim.fs = ARGV[a + 6]
        lim.floor = w_parse(lim.fs)
        if ARGV[a + 7] ~= '' then lim.bound = w_parse(ARGV[a + 7]) end
      elseif lim.amount == 0 then
        lim.fs = '0'
        lim.floor = w_parse('0')
        if cover ~= '' then lim.bound = w_parse(cover) end
      else
        lim.floor = w_mul(t, w_parse(ARGV[a + 5]))
        lim.fs = w_format(lim.floor)
        if cover ~= '' then lim.bound = w_add(lim.floor, w_parse(cover)) end
      end
      a = a + 8
      if status == nil then
        local sig, v = st.p[lim.name], st.v[lim.name]
        if sig and sig ~= lim.sig then
          status = {2, b}
        else
          lim.missing = not sig
          lim.f = lim.floor
          if v then
            local stored = w_parse(v)
            if w_cmp(stored, lim.floor) > 0 then lim.f = stored; lim.fs = v end
          end
          if lim.check and (lim.bound == nil or w_cmp(lim.f, lim.bound) > 0) then ok = false end
          observed[#observed + 1] = lim.fs
        end
      end
      bk.limits[#bk.limits + 1] = lim
    end
    buckets[#buckets + 1] = bk
  end
  if status ~= nil then
    out[#out + 1] = status
  elseif not ok then
    table.insert(observed, 1, 0)
    out[#out + 1] = observed
  else
    for _, bk in ipairs(buckets) do
      for _, lim in ipairs(bk.limits) do
        if lim.missing or w_sign(lim.debit) ~= 0 then
          b_write(bk.st, lim.name, lim.missing and lim.sig, w_add(lim.f, lim.debit), lim.amount)
        end
      end
      b_save(bk.st, bk.now, ttl)
      if bk.st.fresh then redis.call('ZADD', KEYS[1], 0, bk.member) end
    end
    if lease then
      redis.call('DEL', lease.key)
      redis.call('HSET', lease.key, 'rec', lease.rec, 'ver', lease.ver, 'ended', lease.ended, 'keep', lease.keep, 'exp', lease.exp)
      if lease.ended == '0' then
        redis.call('ZADD', KEYS[lk + 1], 0, lease.id)
        redis.call('ZADD', KEYS[lk + 2], 0, lease.id)
        if lease.exp ~= '0' then redis.call('ZADD', KEYS[lk + 3], lease.exp, lease.id) end
      else
        local left = tonumber(lease.keep) - lease.now
        if left < 1 then left = 1 end
        redis.call('PEXPIRE', lease.key, string.format('%.0f', left + 60000))
      end
      if lease.ev ~= '' then append_event(KEYS[lk + 4], KEYS[lk + 5], KEYS[lk + 6], lease.ev, lease.evjs) end
    end
    table.insert(observed, 1, 1)
    out[#out + 1] = observed
  end
end
return out
`
