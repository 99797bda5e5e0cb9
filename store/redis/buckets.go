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
		var b argsBuilder
		b.begin(s, ns)
		b.add(req, lease)
		keys, args := b.finish()
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

// argsBuilder makes the keys and arguments of one luaConsume call:
// begin, add each request, finish.
type argsBuilder struct {
	s          *Store
	ns         string
	keys, args []string
	// prev are the arguments of the previous request's buckets (nil: it
	// had a lease, or there is none), cur this one's
	prev, cur []*bucketArgs
	entries   int // requests and groups of repeats
	group     int // the index in args of the last entry's count if it is a group, else 0
	groupN    int // that count
	// groups holds, for each entry, the requests of its group (0: a
	// request sent in full), and shapes a group's limits, to read the
	// answers (from what the builder read while the requests were its)
	groups []int
	shapes [][]groupLimit
}

// groupLimit is one limit of a group's requests, in order: its bucket and
// place in it, its parameters and what a grant adds to its excess; or,
// with l -1, a bucket (whose time the answer holds before its limits').
type groupLimit struct {
	b, l   int
	params bucket.Params
	debit  bucket.Tick
}

// begin starts a call.
func (b *argsBuilder) begin(s *Store, ns string) {
	b.s, b.ns = s, ns
	b.keys = append(make([]string, 0, 4), s.keys.buckets(ns))
	// room for one request of one limit and a group: a hot bucket's
	// batch; unlike requests grow it
	b.args = append(make([]string, 0, 20), strconv.FormatInt(s.opts.bucketTTL, 10), "")
}

// finish returns the call's keys and arguments.
func (b *argsBuilder) finish() (keys, args []string) {
	b.args[1] = itoa(b.entries)
	return b.keys, b.args
}

// maxSharedKeys bounds the keys a call looks through for one it names
// already: a bucket that several requests of a batch name is passed once
// (its index in KEYS repeated), so Redis takes fewer arguments.
const maxSharedKeys = 16

// keyIndex returns the index in KEYS (from 1) of key, added if new.
func (b *argsBuilder) keyIndex(key string) string {
	for i := 1; i < len(b.keys) && i <= maxSharedKeys; i++ {
		if b.keys[i] == key {
			return smallInts[i+1]
		}
	}
	b.keys = append(b.keys, key)
	return itoa(len(b.keys))
}

// smallInts are the decimal strings of 0 to 127, which the arguments
// name often (indexes in KEYS, counts).
var smallInts = func() (s [128]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func itoa(n int) string {
	if n >= 0 && n < len(smallInts) {
		return smallInts[n]
	}
	return strconv.Itoa(n)
}

// add appends one request, with its lease if not nil. Each bucket's key,
// index member and limits' arguments are formatted once per
// BucketRequest that the caller recycles (its Hint: bucketArgs), and
// formatted again only when they change.
//
// A request without a lease whose buckets' arguments are those of the
// previous request, its time apart (a hot bucket's batch is mostly such),
// is sent as a repeat, in a group of the repeats at its time that follow
// each other: "-1", the time and how many, which the script decides on the
// previous request's arguments as it read them.
func (b *argsBuilder) add(req *store.ConsumeRequest, lease *leaseArgs) {
	cur := b.cur[:0]
	for i := range req.Buckets {
		cur = append(cur, b.s.bucketArgs(b.ns, &req.Buckets[i], req.Now))
	}
	if lease == nil && len(cur) > 0 && sameArgs(b.prev, cur) {
		b.prev, b.cur = cur, b.prev[:0]
		if b.group > 0 && b.args[b.group-1] == cur[0].nowStr {
			b.groupN++
			b.args[b.group] = itoa(b.groupN)
			b.groups[len(b.groups)-1] = b.groupN
			return
		}
		b.args = append(b.args, "-1", cur[0].nowStr, "1")
		b.group, b.groupN = len(b.args)-1, 1
		b.entries++
		b.groups = append(b.groups, 1)
		var shape []groupLimit
		for i := range req.Buckets {
			shape = append(shape, groupLimit{b: i, l: -1}) // its time
			for j := range req.Buckets[i].Limits {
				lr := &req.Buckets[i].Limits[j]
				shape = append(shape, groupLimit{b: i, l: j, params: lr.Params, debit: debitOf(lr)})
			}
		}
		b.shapes = append(b.shapes, shape)
		return
	}
	b.group = 0
	b.entries++
	b.groups = append(b.groups, 0)
	b.shapes = append(b.shapes, nil)
	if lease == nil {
		b.prev, b.cur = cur, b.prev[:0]
	} else {
		b.prev, b.cur = nil, cur[:0]
	}
	if lease == nil {
		b.args = append(b.args, "0")
	} else {
		b.args = append(b.args, itoa(len(b.keys)+1))
		b.keys = append(b.keys, lease.keys...)
		b.args = append(b.args, lease.args...)
	}
	b.args = append(b.args, itoa(len(req.Buckets)))
	for i, h := range cur {
		br := &req.Buckets[i]
		b.args = append(b.args, b.keyIndex(h.key), h.member, h.nowStr, itoa(len(br.Limits)))
		for j := range h.limits {
			b.args = append(b.args, h.limits[j].args[:]...)
		}
	}
}

// sameArgs reports whether the buckets of a and b have the same
// arguments, their time apart.
func sameArgs(a, b []*bucketArgs) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		if x.key != y.key || x.member != y.member || len(x.limits) != len(y.limits) {
			return false
		}
		for j := range x.limits {
			if x.limits[j].args != y.limits[j].args {
				return false
			}
		}
	}
	return true
}

// bucketArgs is a BucketRequest's Hint on this backend: the arguments of
// luaConsume for its bucket, as last formatted, and what they were
// formatted from.
type bucketArgs struct {
	ns, entity, resource string
	key, member          string
	now                  int64
	nowStr               string
	limits               []limitArgs
}

// limitArgs are one limit's seven arguments (appendLimit) and what they
// were formatted from.
type limitArgs struct {
	name   string
	params bucket.Params
	amount int64
	check  bool
	moment int64 // a calendar quota's, at now
	set    bool  // args are formatted
	args   [7]string
}

// bucketArgs returns br's arguments at now, from its Hint where they are
// still those of br, else formatted anew and kept in its Hint.
func (s *Store) bucketArgs(ns string, br *store.BucketRequest, now int64) *bucketArgs {
	h, _ := br.Hint.(*bucketArgs)
	if h == nil {
		h = &bucketArgs{now: now, nowStr: strconv.FormatInt(now, 10)}
		br.Hint = h
	}
	if h.ns != ns || h.entity != br.Key.Entity || h.resource != br.Key.Resource || h.key == "" {
		h.ns, h.entity, h.resource = ns, br.Key.Entity, br.Key.Resource
		h.key, h.member = s.keys.bucket(ns, br.Key.Entity, br.Key.Resource), indexMember(br.Key)
	}
	if h.now != now {
		h.now, h.nowStr = now, strconv.FormatInt(now, 10)
	}
	if len(h.limits) != len(br.Limits) {
		h.limits = make([]limitArgs, len(br.Limits))
	}
	for j := range br.Limits {
		lr, la := &br.Limits[j], &h.limits[j]
		moment := int64(0)
		if !lr.Params.Window.IsZero() {
			moment = lr.Params.Moment(now)
		}
		if !la.set || la.name != lr.Name || la.params != lr.Params || la.amount != lr.Amount ||
			la.check != lr.Check || la.moment != moment {
			la.name, la.params, la.amount, la.check, la.moment = lr.Name, lr.Params, lr.Amount, lr.Check, moment
			appendLimit(la.args[:0], lr, now)
			la.set = true
		}
	}
	return h
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
	x, err := excessOf(m)
	if err != nil {
		return bucket.State{}, err
	}
	return observedAt(x, p, t)
}

// excessOf reads an excess the acquire script answered: an integer, or a
// decimal string when too large for the script's doubles.
func excessOf(m *rueidis.RedisMessage) (bucket.Tick, error) {
	if m.IsInt64() {
		x, _ := m.AsInt64()
		return bucket.TickOf(x), nil
	}
	s, err := m.ToString()
	if err != nil {
		return bucket.Tick{}, fmt.Errorf("redis: consume: %w", err)
	}
	x, err := bucket.ParseTick(s)
	if err != nil {
		return bucket.Tick{}, fmt.Errorf("redis: a limit's excess %q: %w", s, err)
	}
	return x, nil
}

// observedAt is the state at t of a limit of parameters p whose excess at
// t is x: its full tick is t's tick plus x (for a calendar quota, t is
// the first instant of the window it was decided in); a concurrency
// limit's x is its millitokens in use.
func observedAt(x bucket.Tick, p bucket.Params, t int64) (bucket.State, error) {
	if !p.Refills() {
		used, ok := x.Int64()
		if !ok {
			return bucket.State{}, fmt.Errorf("redis: a concurrency limit in use %s", x)
		}
		return bucket.State{Tokens: p.Capacity - used}, nil
	}
	return bucket.AtTick(bucket.TickAt(t, p).Add(x), p, t), nil
}

// debitOf is what a grant of lr adds to its limit's excess: its debit in
// ticks, or for a concurrency limit its millitokens.
func debitOf(lr *store.LimitRequest) bucket.Tick {
	if !lr.Params.Refills() {
		return bucket.TickOf(lr.Amount)
	}
	return bucket.DebitTicks(lr.Amount, lr.Params)
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
