package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Consume implements store.Buckets: one call of luaConsume, shared with
// the acquires of this process on the same bucket that arrive meanwhile
// (lane.go); when a limit's parameters changed, their adoption first
// (reconfigure), and when a bucket was written at a later time, the call
// again at that time.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := store.CheckConsumeEvent(req); err != nil {
		return false, err
	}
	if len(req.Buckets) == 0 {
		return true, nil
	}
	if req.Lease == nil {
		return s.lanes.submit(ctx, s, ns, req)
	}
	lease, err := s.newLeaseArgs(ns, req)
	if err != nil {
		return false, err
	}
	return s.consumeAlone(ctx, ns, req, lease)
}

// consumeAlone is Consume in calls of its own.
func (s *Store) consumeAlone(ctx context.Context, ns string, req *store.ConsumeRequest, lease *leaseArgs) (bool, error) {
	for range maxRetries {
		keys, args := s.consumeHeader(ns, 1)
		keys, args = s.appendRequest(keys, args, ns, req, lease)
		cctx, cancel := s.callContext(ctx)
		res, err := s.run(cctx, consumeScript, keys, args).ToArray()
		cancel()
		if err != nil {
			return false, fmt.Errorf("redis: consume: %w", err)
		}
		done, granted, err := s.settle(ctx, ns, req, res[0])
		if done {
			return granted, err
		}
	}
	return false, fmt.Errorf("redis: consume: the buckets kept changing (%d tries)", maxRetries)
}

// settle reads one request's answer of luaConsume: the verdict (done),
// or, when a bucket must adopt new parameters, their adoption before the
// request is sent again (not done).
func (s *Store) settle(ctx context.Context, ns string, req *store.ConsumeRequest, msg rueidis.RedisMessage) (done, granted bool, err error) {
	answer, err := msg.ToArray()
	if err != nil {
		return true, false, fmt.Errorf("redis: consume: %w", err)
	}
	status, err := answer[0].AsInt64()
	if err != nil {
		return true, false, fmt.Errorf("redis: consume: %w", err)
	}
	switch status {
	case 0, 1:
		return true, status == 1, setObserved(answer[1:], req)
	case 2:
		b, _ := answer[1].AsInt64()
		if err := s.reconfigure(ctx, ns, &req.Buckets[b-1], req.Now); err != nil {
			return true, false, err
		}
		return false, false, nil
	case 4:
		return true, false, fmt.Errorf("lease %q: %w", req.Lease.ID, model.ErrLeaseExists)
	}
	return true, false, fmt.Errorf("redis: consume: answer %d", status)
}

// maxRetries bounds the calls of one Consume: each retry follows another
// process changing a limit's parameters.
const maxRetries = 8

// consumeHeader returns the keys and arguments of a luaConsume call of n
// requests, before the requests (appendRequest).
func (s *Store) consumeHeader(ns string, n int) (keys, args []string) {
	keys = append(make([]string, 0, 8), s.keys.buckets(ns))
	args = append(make([]string, 0, 32), strconv.FormatInt(s.opts.bucketTTL, 10), strconv.Itoa(n))
	return keys, args
}

// appendRequest appends one request of luaConsume, with its lease if not
// nil.
func (s *Store) appendRequest(keys, args []string, ns string, req *store.ConsumeRequest, lease *leaseArgs) ([]string, []string) {
	if lease == nil {
		args = append(args, "0")
	} else {
		args = append(args, strconv.Itoa(len(keys)+1))
		keys = append(keys, lease.keys...)
		args = append(args, lease.args...)
	}
	args = append(args, strconv.Itoa(len(req.Buckets)))
	for i := range req.Buckets {
		br := &req.Buckets[i]
		keys = append(keys, s.keys.bucket(ns, br.Key.Entity, br.Key.Resource))
		args = append(args, strconv.Itoa(len(keys)), indexMember(br.Key), strconv.FormatInt(req.Now, 10), strconv.Itoa(len(br.Limits)))
		for j := range br.Limits {
			args = appendLimit(args, &br.Limits[j], req.Now)
		}
	}
	return keys, args
}

// appendLimit appends a limit's seven arguments of luaConsume: its name,
// parameters, debit, cover (how far its excess may be for it to cover its
// amount; empty: never), check, refill amount and, for a calendar quota,
// its moment at now (the index of now's window; empty for other limits).
func appendLimit(args []string, lr *store.LimitRequest, now int64) []string {
	p := lr.Params
	check := "0"
	if lr.Check {
		check = "1"
	}
	if !p.Refills() {
		// The stored number is the millitokens in use.
		cover := strconv.FormatInt(p.Capacity-lr.Amount, 10)
		return append(args, lr.Name, paramsSig(p), strconv.FormatInt(lr.Amount, 10), cover, check, "0", "")
	}
	cover := "" // an amount above the capacity is never covered
	if lr.Amount <= p.Capacity {
		cover = bucket.DebitTicks(p.Capacity-lr.Amount, p).String()
	}
	moment := ""
	if !p.Window.IsZero() {
		moment = strconv.FormatInt(p.Moment(now), 10)
	}
	return append(args, lr.Name, paramsSig(p), bucket.DebitTicks(lr.Amount, p).String(), cover, check,
		strconv.FormatInt(p.Amount, 10), moment)
}

// setObserved sets the observed state of each limit of req from the
// answer of luaConsume: for each bucket, the time it was decided at, then
// the excess of its limits in order, each calendar quota's followed by
// the moment it was decided at.
func setObserved(answer []rueidis.RedisMessage, req *store.ConsumeRequest) error {
	k := 0
	for i := range req.Buckets {
		at, err := answer[k].AsInt64()
		if err != nil {
			return fmt.Errorf("redis: consume: %w", err)
		}
		k++
		for j := range req.Buckets[i].Limits {
			lr := &req.Buckets[i].Limits[j]
			t := at
			if !lr.Params.Window.IsZero() {
				m, err := answer[k+1].AsInt64()
				if err != nil {
					return fmt.Errorf("redis: consume: %w", err)
				}
				t = lr.Params.Millis(m)
			}
			if lr.Observed, err = observedState(&answer[k], lr.Params, t); err != nil {
				return err
			}
			k++
			if !lr.Params.Window.IsZero() {
				k++
			}
		}
	}
	return nil
}

// observedState is the state at t of a limit of parameters p whose excess
// at t the acquire script answered: an integer, or a decimal string when
// too large for the script's doubles.
func observedState(m *rueidis.RedisMessage, p bucket.Params, t int64) (bucket.State, error) {
	if !m.IsInt64() {
		x, err := m.ToString()
		if err != nil {
			return bucket.State{}, fmt.Errorf("redis: consume: %w", err)
		}
		return stateOf(x, t, p, t)
	}
	x, _ := m.AsInt64()
	if !p.Refills() {
		return bucket.State{Tokens: p.Capacity - x}, nil
	}
	return bucket.AtTick(bucket.TickAt(t, p).Add(bucket.TickOf(x)), p, t), nil
}

// anchorTick is the tick of an anchor a, which is in p's time (a Unix ms,
// or a calendar quota's window index: Params.Moment).
func anchorTick(a int64, p bucket.Params) bucket.Tick { return bucket.TickAt(p.Millis(a), p) }

// A refilling limit is stored as its excess x (field "v|name") at its
// anchor a ("a|name", a Unix ms; for a calendar quota, the index of a
// window): its full tick (package bucket) is a·Amount + x. Anchored at its latest write's time, x stays small
// ((Capacity − Tokens)·Period − Rem: at most the capacity's worth of
// ticks while the limit is not in debt), so the scripts' arithmetic stays
// in doubles (docs/redis.md, "Stored numbers"). A limit without an anchor
// is anchored at 0. A concurrency limit's number is its millitokens in
// use.

// stateOf returns the state at now of a limit of parameters p whose
// excess is x at the anchor a (for a concurrency limit: whose
// millitokens in use are x).
func stateOf(x string, a int64, p bucket.Params, now int64) (bucket.State, error) {
	if !p.Refills() {
		used, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return bucket.State{}, fmt.Errorf("redis: a concurrency limit in use %q: %w", x, err)
		}
		return bucket.State{Tokens: p.Capacity - used}, nil
	}
	ex, err := bucket.ParseTick(x)
	if err != nil {
		return bucket.State{}, fmt.Errorf("redis: a limit's excess %q: %w", x, err)
	}
	return bucket.AtTick(anchorTick(a, p).Add(ex), p, now), nil
}

// storedFields appends the fields and values that store state st of
// limit name of parameters p at the instant at, anchored there.
func storedFields(set []string, name string, st bucket.State, p bucket.Params, at int64) []string {
	if !p.Refills() {
		return append(set, "v|"+name, strconv.FormatInt(p.Capacity-st.Tokens, 10))
	}
	a := p.Moment(at)
	x := bucket.FullTick(st, p, at).Sub(anchorTick(a, p))
	return append(set, "v|"+name, x.String(), "a|"+name, strconv.FormatInt(a, 10))
}

// paramsSig is how a limit's parameters are stored:
// "capacity/amount/period", and for a calendar quota "/window" after
// them ("3000/3000/1/day@Europe/Berlin"), so that a quota never reads as
// a rate of the same numbers. The scripts read a window's unit from it
// (b_span).
func paramsSig(p bucket.Params) string {
	sig := strconv.FormatInt(p.Capacity, 10) + "/" + strconv.FormatInt(p.Amount, 10) + "/" + strconv.FormatInt(p.Period, 10)
	if !p.Window.IsZero() {
		sig += "/" + p.Window.String()
	}
	return sig
}

// parseSig reads paramsSig.
func parseSig(sig string) (bucket.Params, error) {
	parts := strings.SplitN(sig, "/", 4)
	if len(parts) < 3 {
		return bucket.Params{}, fmt.Errorf("redis: limit parameters %q", sig)
	}
	var n [3]int64
	for i, p := range parts[:3] {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return bucket.Params{}, fmt.Errorf("redis: limit parameters %q", sig)
		}
		n[i] = v
	}
	p := bucket.Params{Capacity: n[0], Amount: n[1], Period: n[2]}
	if len(parts) == 4 {
		w, err := calendar.Parse(parts[3])
		if err != nil {
			return bucket.Params{}, fmt.Errorf("redis: limit parameters %q: %w", sig, err)
		}
		p.Window = w
	}
	return p, nil
}

// indexMember is a bucket's member of the namespace's bucket index:
// resource, then entity, so that a resource's buckets sort together.
func indexMember(k store.BucketKey) string { return k.Resource + "|" + k.Entity }
