package redis

// luaConsume applies a batch of acquires, in order, each all or nothing
// (docs/redis.md, "The acquire script").
//
// KEYS[1] is the namespace's bucket index; KEYS[2..] are buckets.
// ARGV: the bucket TTL (ms), the number of entries, then for each entry
// either "-1", a time and a count n, a group of repeats: n requests each
// with the previous request's buckets and limits, without a lease, at that
// time (sent for the many alike requests of a hot bucket's batch, which
// the script then reads once and decides together); or a request: the
// index in KEYS of its lease's hash (0: none; the lease
// indexes and the audit keys follow it in KEYS) and then ten values
// (reused id, now, the record's JSON, version, ended, keep-until, expiry,
// id, and the event's id and JSON), its number of buckets, and
// for each bucket its key's index in KEYS, its index member, its time and
// its number of limits, and for each limit seven values: name, parameters
// ("capacity/amount/period[/window]"), debit, cover, check ("1" or "0"),
// refill amount ("0" for a concurrency limit) and, for a calendar quota,
// the request's moment (its window's index; empty for other limits).
//
// A bucket is decided at its time t: the request's, or its latest write's
// if later (time never runs backwards for a bucket). A calendar quota's
// time is counted in windows: it is decided at its moment lt, the
// request's, or its anchor's if later. Each limit's state
// at t (lt) is its excess e >= 0: for a refilling limit, how far its full tick
// is above t·amount, the stored excess x minus (t − anchor)·amount (the
// refill since the anchor); for a concurrency limit the millitokens in
// use; either way raised to 0 (full, or nothing in use). A checked limit
// covers its debit if e <= cover ((capacity − debit amount)·period, or
// capacity − amount; an empty cover is never covered: an amount above the
// capacity). If every checked limit of every bucket covers, each limit is
// written e + debit, anchored at t or lt (a missing limit is full: e = 0, and
// is written with its parameters). A limit stored with other parameters
// answers "reconfigure" and the request writes nothing: Go adopts the new
// parameters first.
//
// A request may carry a durable lease's record (store.ConsumeRequest.Lease),
// written, indexed and with its audit event in the same step as the debit;
// a record of its id that is open, or (for a reused id) a tombstone still
// kept, answers {4} and the request writes nothing.
//
// Each request's answer is {1 (granted) or 0 (refused), then for each
// bucket its time t and the e of each of its limits, a quota's followed
// by its lt}, {2, the ordinal of
// the bucket to reconfigure} or {4}. A group's answer is one: {5, then
// its first request's values as above, then n, the requests granted (the
// first n; request i saw each limit's e + min(i, n)·debit)}; {2, b} for
// every request of it; or, when its numbers are not plain, {6, then each
// request's answer}.
// luaConsumeFns are luaConsume's helpers, part of the library (made once,
// not on every call): assess and grant, on the request plan the acquire
// function reads.
const luaConsumeFns = `
-- The plan: the last request read in full, its buckets and limits as
-- flat arrays (no table per request), read from ARGV once and reused by
-- the groups of repeats that follow it; set by the acquire function.
-- P_n buckets, bucket b: its key, index member, time, limit names (the
-- table b_load keeps), and its limits k = P_l0[b] .. P_l0[b] + P_nl[b] − 1.
-- Limit k: its name's parameters, debit (as sent and parsed), cover
-- (parsed; false: never covered), check, refill amount (parsed, and as a
-- double for b_write) and a quota's moment (false for other limits).
local P_n = 0
local P_key, P_member, P_t, P_names, P_l0, P_nl = {}, {}, {}, {}, {}, {}
local L_sig, L_debit, L_debitn, L_cover, L_check, L_amount, L_amountf, L_m = {}, {}, {}, {}, {}, {}, {}, {}
-- p_read reads a request's buckets from ARGV at a into the plan, and
-- returns where the next entry starts.
local function p_read(KEYS, ARGV, a)
  local nb = tonumber(ARGV[a]); a = a + 1
  P_n = nb
  local k = 1
  for b = 1, nb do
    local nl = tonumber(ARGV[a + 3])
    P_key[b], P_member[b], P_t[b], P_l0[b], P_nl[b] = KEYS[tonumber(ARGV[a])], ARGV[a + 1], tonumber(ARGV[a + 2]), k, nl
    local names = {}
    a = a + 4
    for l = 1, nl do
      local cover, m = ARGV[a + 3], ARGV[a + 6]
      names[l] = ARGV[a]
      -- parsed once: the number functions never change their operands
      L_sig[k], L_debit[k], L_debitn[k] = ARGV[a + 1], ARGV[a + 2], n_parse(ARGV[a + 2])
      L_cover[k], L_check[k] = cover ~= '' and n_parse(cover), ARGV[a + 4] == '1'
      L_amount[k], L_amountf[k], L_m[k] = n_parse(ARGV[a + 5]), tonumber(ARGV[a + 5]), m ~= '' and tonumber(m)
      a = a + 7
      k = k + 1
    end
    P_names[b] = names
  end
  return a
end
-- per bucket: its state and its time; per limit: its excess and moment;
-- kept across calls (each call writes an entry before it reads it)
local sts, ts, es, lts = {}, {}, {}, {}
-- assess reads the plan's buckets at treq (nil: each bucket's own time;
-- time never runs backwards for a bucket: a request dated before its
-- latest write is decided at that write's time) and computes each limit's
-- excess: its status ({2, b}: reconfigure; nil), whether every checked
-- limit covers, the number of limits, and the answer's values (a table
-- whose first entry the caller sets).
local function assess(treq, status)
  local ok = true
  local observed = {0}
  local k = 0
  for b = 1, P_n do
    local st = b_load(P_key[b], P_names[b])
    local vals = st.vals
    st.member = P_member[b]
    local t = treq or P_t[b]
    if st.r > t then t = st.r end
    sts[b], ts[b] = st, t
    observed[#observed + 1] = t
    for l = 1, P_nl[b] do
      if status == nil then
        local j = k + 1 -- this limit's index in the plan (every one before it was read)
        local sig, v = vals[3 * l + 1], vals[3 * l + 2]
        if sig and sig ~= L_sig[j] then
          status = {2, b}
        else
          -- the excess at t: x − (t − anchor)·amount, at least 0; a
          -- quota's at its moment lt, never before its anchor
          local e, lt, m = 0, t, L_m[j]
          local anchor = tonumber(vals[3 * l + 3] or 0)
          if m then
            lt = m
            if anchor > lt then lt = anchor end
          end
          if v then
            local x, amount = n_parse(v), L_amount[j]
            local d = lt - anchor
            local p = type(x) == 'number' and type(amount) == 'number' and d * amount
            if p and p >= N_MAX then
              -- a refill of 2^53 or more leaves no plain excess (below 2^53)
            elseif p and p > -N_MAX and x - p < N_MAX then
              -- plain x and p: their difference is exact when below 2^53
              if x > p then e = x - p end
            else
              e = n_add(x, n_neg(n_mul(d, amount)))
              if n_sign(e) < 0 then e = 0 end
            end
          end
          k = j
          es[k], lts[k] = e, lt
          if L_check[k] and (not L_cover[k] or n_cmp(e, L_cover[k]) > 0) then ok = false end
          -- a plain number is an integer reply, exact below 2^53
          if type(e) == 'number' then observed[#observed + 1] = e else observed[#observed + 1] = n_format(e) end
          if m then observed[#observed + 1] = lt end
        end
      end
    end
  end
  return status, ok, k, observed
end
-- grant writes what n grants of the plan's request leave, each limit's
-- excess e + n·debit anchored at t or lt (a missing limit with its
-- parameters), and each bucket's time t.
local function grant(n)
  local k = 0
  for b = 1, P_n do
    local st = sts[b]
    for l = 1, P_nl[b] do
      k = k + 1
      local missing = not st.vals[3 * l + 1]
      if missing or L_debit[k] ~= '0' then
        local x = es[k]
        if n == 1 then x = n_add(x, L_debitn[k]) else x = n_add(x, n_mul(n, L_debitn[k])) end
        b_write(st, l, missing and L_sig[k], x, L_amountf[k], lts[k], ts[b])
      end
    end
    b_touch(st, ts[b])
  end
end
`

const luaConsume = `
b_reset()
P_n = 0 -- a group follows a request of its own call
b_idx, b_ttl = KEYS[1], tonumber(ARGV[1])
local nent = tonumber(ARGV[2])
local a = 3
local out = {}
for q = 1, nent do
  local lease = nil
  local lk = tonumber(ARGV[a]); a = a + 1
  local treq, cnt = nil, 1
  if lk < 0 then
    treq, cnt = tonumber(ARGV[a]), tonumber(ARGV[a + 1]); a = a + 2
  else
    if lk > 0 then
      lease = {key = KEYS[lk], reused = ARGV[a] == '1', now = tonumber(ARGV[a + 1]), rec = ARGV[a + 2], ver = ARGV[a + 3],
        ended = ARGV[a + 4], keep = ARGV[a + 5], exp = ARGV[a + 6], id = ARGV[a + 7], ev = ARGV[a + 8], evjs = ARGV[a + 9]}
      a = a + 10
    end
    a = p_read(KEYS, ARGV, a)
  end
  local exists = nil
  if lease then
    local have = redis.call('HMGET', lease.key, 'ended', 'keep')
    if have[1] and (have[1] == '0' or (lease.reused and tonumber(have[2]) > lease.now)) then exists = {4} end
  end
  local status, ok, nk, observed = assess(treq, exists)
  if not treq then
    -- a request
    if status ~= nil then
      out[#out + 1] = status
    elseif not ok then
      out[#out + 1] = observed
    else
      grant(1)
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
      observed[1] = 1
      out[#out + 1] = observed
    end
  elseif status ~= nil then
    -- a group that must adopt new parameters: every request alike
    out[#out + 1] = status
  else
    -- a group of cnt alike requests at one time, decided together when
    -- its checked limits' numbers are plain (docs/redis.md, "Repeats,
    -- decided in groups"): request i (from 0) sees each limit's excess
    -- e + i·debit while the requests before it were granted, and is
    -- granted iff every checked limit then covers, so the first refusal
    -- leaves the state as it is and refuses every request after it
    local n = 0
    if ok then
      n = cnt
      for j = 1, nk do
        local e = es[j]
        if L_check[j] then
          local d, cover = L_debitn[j], L_cover[j]
          if type(e) ~= 'number' or type(d) ~= 'number' or type(cover) ~= 'number' then
            n = nil
            break
          end
          -- e + i·d > cover is exact: below 2^53 the sum is, and a rounded
          -- sum of 2^53 or more is above the plain cover, as the true one is
          local i = 1
          while i < n and e + i * d <= cover do i = i + 1 end
          n = i
        end
      end
    end
    if n == nil then
      -- not plain: one request after the other, each its own answer
      local all = {6}
      for i = 1, cnt do
        if i > 1 then status, ok, nk, observed = assess(treq, nil) end
        if ok then
          grant(1)
          observed[1] = 1
        end
        all[#all + 1] = observed
      end
      out[#out + 1] = all
    else
      -- one answer for the group: 5, request 0's observed values, then n
      -- (request i's excess is e + min(i, n)·debit, which Go adds)
      if n > 0 then grant(n) end
      observed[1] = 5
      observed[#observed + 1] = n
      out[#out + 1] = observed
    end
  end
end
b_flush()
return out
`
