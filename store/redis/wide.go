package redis

// luaWide is the script library of exact wide integers. Lua's numbers are
// doubles, exact only below 2^53, and a full tick reaches 2^110
// (package bucket), so stored numbers are decimal strings and the scripts
// only compare, add and multiply them here: a number is split into limbs
// of seven decimal digits (each below 10^7), added limb by limb with a
// carry or borrow of one, multiplied limb by limb (products below 10^14),
// and compared limb by limb. Every intermediate stays below 2^53, the
// doubles' exact range, so the results are exact whatever the numbers'
// size (docs/redis.md, "Exact arithmetic"). Nothing here divides.
//
// A number is a table {neg = bool, [1] = lowest limb, ...}; zero is
// {neg = false, 0}. The functions are made on the first call of wide(),
// which returns them as a table (parse, format, cmp, add, mul, sign): a
// script whose numbers all stay plain (luaNum) never makes them.
const luaWide = `
local W
local function wide()
if W then return W end
local W_BASE = 10000000
local function w_parse(s)
  local neg = false
  if string.sub(s, 1, 1) == '-' then neg = true; s = string.sub(s, 2) end
  local n = {neg = false}
  local i = #s
  while i >= 1 do
    local j = i - 6
    if j < 1 then j = 1 end
    n[#n + 1] = tonumber(string.sub(s, j, i))
    i = j - 1
  end
  while #n > 1 and n[#n] == 0 do n[#n] = nil end
  if #n == 0 then n[1] = 0 end
  n.neg = neg and not (#n == 1 and n[1] == 0)
  return n
end
local function w_format(n)
  local parts = {tostring(n[#n])}
  for i = #n - 1, 1, -1 do parts[#parts + 1] = string.format('%07d', n[i]) end
  local s = table.concat(parts)
  if n.neg then s = '-' .. s end
  return s
end
local function w_cmpmag(a, b)
  if #a ~= #b then if #a < #b then return -1 end return 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then if a[i] < b[i] then return -1 end return 1 end
  end
  return 0
end
local function w_cmp(a, b)
  if a.neg ~= b.neg then if a.neg then return -1 end return 1 end
  local m = w_cmpmag(a, b)
  if a.neg then return -m end
  return m
end
local function w_addmag(a, b)
  local r = {neg = false}
  local carry = 0
  local n = #a
  if #b > n then n = #b end
  for i = 1, n do
    local d = (a[i] or 0) + (b[i] or 0) + carry
    if d >= W_BASE then r[i] = d - W_BASE; carry = 1 else r[i] = d; carry = 0 end
  end
  if carry > 0 then r[n + 1] = carry end
  return r
end
-- w_submag returns |a| - |b| for |a| >= |b|.
local function w_submag(a, b)
  local r = {neg = false}
  local borrow = 0
  for i = 1, #a do
    local d = a[i] - (b[i] or 0) - borrow
    if d < 0 then r[i] = d + W_BASE; borrow = 1 else r[i] = d; borrow = 0 end
  end
  while #r > 1 and r[#r] == 0 do r[#r] = nil end
  return r
end
local function w_add(a, b)
  local r
  if a.neg == b.neg then
    r = w_addmag(a, b); r.neg = a.neg
  elseif w_cmpmag(a, b) >= 0 then
    r = w_submag(a, b); r.neg = a.neg
  else
    r = w_submag(b, a); r.neg = b.neg
  end
  if #r == 1 and r[1] == 0 then r.neg = false end
  return r
end
-- w_mul returns a·b for a, b >= 0: the schoolbook product in base 10^7.
-- Each step adds a limb product (below 10^14) to a limb (below 10^7) and
-- a carry (below 10^7 + 1): below 2^53, so exact, as are the remainder
-- and the floor of the division by 10^7 that split it.
local function w_mul(a, b)
  local r = {neg = false}
  for i = 1, #a + #b do r[i] = 0 end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local cur = r[i + j - 1] + a[i] * b[j] + carry
      r[i + j - 1] = cur % W_BASE
      carry = math.floor(cur / W_BASE)
    end
    local k = i + #b
    while carry > 0 do
      local cur = r[k] + carry
      r[k] = cur % W_BASE
      carry = math.floor(cur / W_BASE)
      k = k + 1
    end
  end
  while #r > 1 and r[#r] == 0 do r[#r] = nil end
  return r
end
local function w_sign(a) if a.neg then return -1 end if #a == 1 and a[1] == 0 then return 0 end return 1 end
W = {parse = w_parse, format = w_format, cmp = w_cmp, add = w_add, mul = w_mul, sign = w_sign}
return W
end
`

// luaNum is the scripts' number library: integers held as plain doubles
// while that is exact, in limbs (luaWide) otherwise. A plain number is an
// integer of magnitude below 2^53 (N_MAX); a sum, difference or product of
// two plain numbers is computed in doubles, kept plain if its magnitude is
// below 2^53, and otherwise computed again in limbs. That test is exact:
// the true result is an integer, so when it is below 2^53 in magnitude it
// is a double and the operation returns it exactly, and when it is not,
// the rounded result is not either (rounding is monotonic and ±2^53 are
// doubles). So every plain result is exact, and the common case (stored
// numbers of a few digits, section 2 of docs/redis.md) never builds a
// limb (docs/redis.md, "Exact arithmetic").
const luaNum = luaWide + `
local N_MAX = 9007199254740992
-- n_parse reads a decimal integer: plain if it has at most 15 characters
-- (below 10^15, exact), else in limbs; a number is returned as it is.
-- Adding 0 turns -0 into 0.
local function n_parse(s)
  if type(s) == 'number' then return s end
  if #s <= 15 then return tonumber(s) + 0 end
  return wide().parse(s)
end
local function n_wide(x)
  if type(x) == 'number' then return wide().parse(string.format('%.0f', x)) end
  return x
end
local function n_format(x)
  if type(x) == 'number' then return string.format('%.0f', x) end
  return wide().format(x)
end
local function n_add(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    local r = a + b
    if r < N_MAX and r > -N_MAX then return r end
  end
  return wide().add(n_wide(a), n_wide(b))
end
local function n_neg(a)
  if type(a) == 'number' then return 0 - a end
  local r = {neg = not a.neg}
  for i = 1, #a do r[i] = a[i] end
  if #r == 1 and r[1] == 0 then r.neg = false end
  return r
end
local function n_mul(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    local r = a * b
    if r < N_MAX and r > -N_MAX then return r + 0 end
  end
  local x, y = n_wide(a), n_wide(b)
  local w = wide()
  local r = w.mul(x, y)
  r.neg = x.neg ~= y.neg and w.sign(r) ~= 0
  return r
end
local function n_cmp(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    if a < b then return -1 elseif a > b then return 1 end
    return 0
  end
  return wide().cmp(n_wide(a), n_wide(b))
end
local function n_sign(a) return n_cmp(a, 0) end
`
