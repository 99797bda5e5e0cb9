package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// luaDeltas adds deltas to limits unconditionally (store.ApplyDelta: no
// refill, a refund may pass the capacity until the next acquire raises
// the number to its floor). KEYS are buckets; ARGV: the bucket TTL, the
// number of deltas, then for each its key's index, limit name,
// parameters, addend (ticks or millitokens) and refill amount. A limit
// that does not exist is skipped; one stored with other parameters than
// the delta's makes the call answer {2, the delta's ordinal} and write
// nothing, so that Go converts the amount with the stored ones.
const luaDeltas = `
b_reset()
local ds, bad = d_read(KEYS, ARGV, 3, tonumber(ARGV[2]))
if bad then return {2, bad} end
b_ttl = tonumber(ARGV[1])
d_apply(ds)
b_flush()
return {1}
`

// luaDeltaFns reads and applies deltas given as ARGV from an index on,
// five values each (see luaDeltas), for luaDeltas and luaEndLease.
const luaDeltaFns = `
-- d_read returns the deltas of argv[a...] (keys: the call's KEYS) whose
-- limits exist, or the ordinal of the first one whose limit has other
-- parameters.
local function d_read(keys, argv, a, n)
  local ds = {}
  for i = 1, n do
    local d = {key = keys[tonumber(argv[a])], name = argv[a + 1], sig = argv[a + 2], add = argv[a + 3], amount = tonumber(argv[a + 4])}
    a = a + 5
    local sig = redis.call('HGET', d.key, 'p|' .. d.name)
    if sig then
      if sig ~= d.sig then return nil, i end
      ds[#ds + 1] = d
    end
  end
  return ds, nil
end
-- d_apply adds each delta to its limit's number, in order (b_flush
-- writes them).
local function d_apply(ds)
  for _, d in ipairs(ds) do
    local st = b_load(d.key, {d.name})
    b_write(st, 1, nil, n_add(n_parse(st.vals[5]), n_parse(d.add)), d.amount, tonumber(st.vals[6] or 0), st.r)
  end
end
`

// ApplyDeltas implements store.Buckets: one call of luaDeltas for all of
// them (a namespace's buckets share a hash slot).
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if len(deltas) == 0 {
		return nil
	}
	params := make([]bucket.Params, len(deltas))
	for i, d := range deltas {
		params[i] = d.Params
	}
	if err := s.storedParams(ctx, ns, deltas, params, func(p bucket.Params) bool { return p == bucket.Params{} }); err != nil {
		return err
	}
	for range maxRetries {
		keys, args := s.deltasCall(nil, nil, ns, deltas, params)
		cctx, cancel := s.callContext(ctx)
		res, err := s.run(cctx, deltasScript, keys, args).ToArray()
		cancel()
		if err != nil {
			return fmt.Errorf("redis: apply deltas: %w", err)
		}
		if st, _ := res[0].AsInt64(); st == 1 {
			return nil
		}
		// The parameters changed since the debit: convert with the stored ones.
		if err := s.storedParams(ctx, ns, deltas, params, func(bucket.Params) bool { return true }); err != nil {
			return err
		}
	}
	return fmt.Errorf("redis: apply deltas: the limits kept changing (%d tries)", maxRetries)
}

// storedParams reads, in one round trip, the stored parameters of the
// deltas for which stale is true into params (left as they are where
// the limit does not exist: the script skips it).
func (s *Store) storedParams(ctx context.Context, ns string, deltas []store.Delta, params []bucket.Params, stale func(bucket.Params) bool) error {
	var cmds rueidis.Commands
	var which []int
	for i, d := range deltas {
		if stale(params[i]) {
			cmds = append(cmds, s.c.B().Hget().Key(s.keys.bucket(ns, d.Key.Entity, d.Key.Resource)).Field("p|"+d.Limit).Build())
			which = append(which, i)
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	for j, res := range s.c.DoMulti(ctx, cmds...) {
		sig, err := res.ToString()
		if isNil(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("redis: apply deltas: %w", err)
		}
		if params[which[j]], err = parseSig(sig); err != nil {
			return err
		}
	}
	return nil
}

// deltasCall appends to keys and args those of luaDeltas (with no keys
// and args given) or of the deltas of luaEndLease.
func (s *Store) deltasCall(keys, args []string, ns string, deltas []store.Delta, params []bucket.Params) ([]string, []string) {
	index := make(map[string]int, len(deltas))
	if args == nil {
		args = append(make([]string, 0, 2+5*len(deltas)), strconv.FormatInt(s.opts.bucketTTL, 10))
	}
	args = append(args, strconv.Itoa(len(deltas)))
	for i, d := range deltas {
		key := s.keys.bucket(ns, d.Key.Entity, d.Key.Resource)
		k, ok := index[key]
		if !ok {
			keys = append(keys, key)
			k = len(keys)
			index[key] = k
		}
		p := params[i]
		add := strconv.FormatInt(d.Amount, 10)
		if p.Refills() {
			add = bucket.DebitTicks(d.Amount, p).String()
		}
		args = append(args, strconv.Itoa(k), d.Limit, paramsSig(p), add, strconv.FormatInt(p.Amount, 10))
	}
	return keys, args
}
