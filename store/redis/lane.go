package redis

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Lanes: the acquires of one process on one bucket share calls. A bucket's
// lane has up to maxInFlight calls in flight at once (pipelined on the
// client's connections); while they are, the acquires that arrive queue,
// and go out together in the next call (one luaConsume of many requests,
// each all or nothing, in arrival order), so a hot bucket costs one round
// trip per batch rather than per acquire, and its batches overlap rather
// than wait for each other. An acquire on a lane with a call to spare is
// sent at once, by its own goroutine. Each call is one atomic FCALL that
// decides its requests on the bucket's state as the server holds it then,
// so nothing depends on the order in which the calls of one lane run
// (docs/redis.md, "Sharing calls: lanes").

// maxBatch bounds the requests of one call.
const maxBatch = 128

// maxInFlight bounds the calls of one lane in flight at once, by
// measurement (BENCHMARKS.md, "Repeats and calls in flight"): a second
// call in flight would overlap round trips, but it splits a hot bucket's
// queue into smaller batches, each costing the limiter, the client and the
// server a call's fixed work, and with Redis on the same cores that cost
// more than the overlap gained (a hot key at 8 and 32 goroutines was 10-18%
// slower at 2). The one call in flight already overlaps the limiters'
// work: the goroutines not in it prepare and queue theirs meanwhile. Lanes
// are exact at any bound (docs/redis.md, section 4); the tests hold them
// to it at 4 (lanes.maxInFlight).
const maxInFlight = 1

// laneShards spreads the lanes over independently locked maps.
const laneShards = 64

// lanes are a Store's lanes, by namespace and first bucket. A lane exists
// while it has a call in flight, so the maps hold only busy buckets.
type lanes struct {
	maxInFlight int
	seed        maphash.Seed
	shards      [laneShards]laneShard
}

type laneShard struct {
	mu    sync.Mutex
	lanes map[laneKey]*lane
	_     [64]byte // each shard's lock on a cache line of its own
}

// laneKey names a lane: a namespace and a bucket.
type laneKey struct{ ns, entity, resource string }

// lane is one bucket's calls in flight and its queue: the acquires
// waiting for a call. The shard's lock guards it. The queue is not empty
// only while every call the lane may have is in flight.
type lane struct {
	queue []*pending
	calls int // in flight
}

// pending is one acquire in a lane. Its request belongs to the batch
// that takes it from the queue only while state says so: a caller whose
// context ends takes it back (abandoned) unless the batch is reading or
// settling it, which takes microseconds.
type pending struct {
	ctx     context.Context
	req     *store.ConsumeRequest
	granted bool
	err     error
	state   atomic.Int32
	done    chan struct{} // one token when the verdict is in
}

// A pending's states.
const (
	queued    = iota // in the queue, or in a batch not yet built
	building         // its arguments are being read from its request
	sent             // its batch's call is in flight
	settling         // its answer is being read into its request
	abandoned        // its caller gave up: the batch leaves it alone
)

// pendings recycles pendings, with their channels.
var pendings = sync.Pool{New: func() any { return &pending{done: make(chan struct{}, 1)} }}

func newLanes() *lanes {
	l := &lanes{maxInFlight: maxInFlight, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].lanes = make(map[laneKey]*lane)
	}
	return l
}

func (ls *lanes) shard(k laneKey) *laneShard {
	var h maphash.Hash
	h.SetSeed(ls.seed)
	h.WriteString(k.ns)
	h.WriteByte(0)
	h.WriteString(k.entity)
	h.WriteByte(0)
	h.WriteString(k.resource)
	return &ls.shards[h.Sum64()%laneShards]
}

// submit runs req in the lane of its first bucket: at once if the lane
// has a call to spare (and then the batches that queued meanwhile, in a
// goroutine of their own), else in one of the lane's next calls.
func (ls *lanes) submit(ctx context.Context, s *Store, ns string, req *store.ConsumeRequest) (bool, error) {
	k := laneKey{ns, req.Buckets[0].Key.Entity, req.Buckets[0].Key.Resource}
	sh := ls.shard(k)
	p := pendings.Get().(*pending)
	p.ctx, p.req, p.granted, p.err = ctx, req, false, nil
	p.state.Store(queued)
	sh.mu.Lock()
	l := sh.lanes[k]
	if l == nil {
		l = &lane{}
		sh.lanes[k] = l
	}
	if l.calls < ls.maxInFlight {
		l.calls++
		sh.mu.Unlock()
		one := [1]*pending{p}
		s.runBatch(ns, one[:])
		<-p.done
		granted, err := p.granted, p.err
		ls.next(s, sh, k, l, ns)
		release(p)
		return granted, err
	}
	l.queue = append(l.queue, p)
	sh.mu.Unlock()
	select {
	case <-p.done:
		granted, err := p.granted, p.err
		release(p)
		return granted, err
	case <-ctx.Done():
		return p.abandon()
	}
}

// abandon takes p back from its batch for a caller whose context ended:
// at once while it waits or its call is in flight (the call may still
// debit it: a timed-out acquire may cost tokens, and never admits beyond
// a limit), after the batch is done with its request otherwise.
func (p *pending) abandon() (bool, error) {
	for {
		switch st := p.state.Load(); st {
		case queued, sent:
			if p.state.CompareAndSwap(st, abandoned) {
				// Not recycled: its batch may still hold it.
				return false, p.ctx.Err()
			}
		case building:
			runtime.Gosched() // its arguments take microseconds
		default: // settling: the verdict is moments away
			<-p.done
			granted, err := p.granted, p.err
			release(p)
			return granted, err
		}
	}
}

func release(p *pending) {
	p.ctx, p.req, p.err = nil, nil, nil
	pendings.Put(p)
}

// next sends what queued in lane k while a call was in flight, batch
// after batch in a goroutine, and gives back the lane's call when nothing
// is left (closing the lane with its last call).
func (ls *lanes) next(s *Store, sh *laneShard, k laneKey, l *lane, ns string) {
	sh.mu.Lock()
	batch := l.take(sh, k)
	sh.mu.Unlock()
	if batch == nil {
		return
	}
	go func() {
		for batch != nil {
			s.runBatch(ns, batch)
			sh.mu.Lock()
			batch = l.take(sh, k)
			sh.mu.Unlock()
		}
	}()
}

// take removes up to maxBatch requests from the queue, or, when it is
// empty, gives back one of the lane's calls. The shard's lock is held.
func (l *lane) take(sh *laneShard, k laneKey) []*pending {
	if len(l.queue) == 0 {
		l.calls--
		if l.calls == 0 {
			delete(sh.lanes, k)
		}
		return nil
	}
	n := min(len(l.queue), maxBatch)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	return batch
}

// runBatch sends batch in one call of luaConsume and settles each request
// (its caller wakes on a token in its done); a request that must adopt new
// parameters first is sent again alone (consumeAlone). Requests whose
// callers gave up are left out, or left alone once sent.
func (s *Store) runBatch(ns string, batch []*pending) {
	live := batch[:0] // in place: the batch is the caller's, and only read ahead of live
	var b argsBuilder
	for _, p := range batch {
		if !p.state.CompareAndSwap(queued, building) {
			continue // abandoned
		}
		if err := p.ctx.Err(); err != nil {
			p.err = err
			p.state.Store(settling)
			p.done <- struct{}{}
			continue
		}
		if len(live) == 0 {
			b.begin(s, ns)
		}
		b.add(p.req, nil)
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	for _, p := range live {
		p.state.Store(sent)
	}
	keys, args := b.finish()
	// The batch is bounded by the call timeout, not by any one caller's
	// context: a caller that gives up must not fail the others.
	ctx, cancel := s.callContext(context.WithoutCancel(live[0].ctx))
	res, err := s.run(ctx, consumeScript, keys, args).ToArray()
	cancel()
	if err == nil && len(res) != len(b.groups) {
		err = fmt.Errorf("%d answers for %d requests and groups", len(res), len(b.groups))
	}
	if err != nil {
		for _, p := range live {
			p.finish(false, fmt.Errorf("redis: consume: %w", err))
		}
		return
	}
	r := 0
	for e, n := range b.groups {
		if n == 0 {
			s.settleOne(ns, live[r], res[e])
			r++
			continue
		}
		s.settleGroup(ns, live[r:r+n], b.shapes[e], res[e])
		r += n
	}
}

// finish hands p's verdict to its caller, unless it gave up.
func (p *pending) finish(granted bool, err error) {
	if p.claim() {
		p.deliver(granted, err)
	}
}

// claim reports whether p's request is still its batch's to settle (its
// caller did not give up), and holds it for the batch until deliver.
func (p *pending) claim() bool { return p.state.CompareAndSwap(sent, settling) }

// deliver hands a claimed p's verdict to its caller.
func (p *pending) deliver(granted bool, err error) {
	p.granted, p.err = granted, err
	p.done <- struct{}{}
}

// settleOne reads the answer of one request sent in full, and sends it
// again alone if it must adopt new parameters first.
func (s *Store) settleOne(ns string, p *pending, msg rueidis.RedisMessage) {
	if !p.claim() {
		return // abandoned
	}
	done, granted, err := s.settle(p.ctx, ns, p.req, msg)
	if !done {
		granted, err = s.consumeAlone(p.ctx, ns, p.req, nil)
	}
	p.deliver(granted, err)
}

// settleGroup reads the answer of a group of alike requests: one answer
// for all (status 5: the first n granted, request i having seen each
// limit's excess plus min(i, n) debits), a reconfiguration for each, or
// (status 6) each request's own answer.
func (s *Store) settleGroup(ns string, group []*pending, shape []groupLimit, msg rueidis.RedisMessage) {
	answer, err := msg.ToArray()
	var status int64
	if err == nil {
		status, err = answer[0].AsInt64()
	}
	if err == nil && status == 5 {
		err = s.settleShared(group, shape, answer[1:])
	}
	switch {
	case err != nil:
		for _, p := range group {
			p.finish(false, fmt.Errorf("redis: consume: %w", err))
		}
	case status == 5:
	case status == 6 && len(answer) == len(group)+1:
		for i, p := range group {
			s.settleOne(ns, p, answer[1+i])
		}
	default:
		for _, p := range group {
			s.settleOne(ns, p, msg)
		}
	}
}

// settleShared settles a group from its one answer: its first request's
// observed values (each bucket's time, then each limit's excess, a
// quota's followed by its moment), then n. The group's limits are read
// from its shape, not from a request: a request whose caller gave up is
// no longer the batch's to read.
func (s *Store) settleShared(group []*pending, shape []groupLimit, vals []rueidis.RedisMessage) error {
	n, err := vals[len(vals)-1].AsInt64()
	if err != nil {
		return err
	}
	type limit struct {
		x  bucket.Tick
		at int64
	}
	limits := make([]limit, len(shape))
	k := 0
	var at int64
	for c, gl := range shape {
		if gl.l < 0 { // a bucket's time, before its limits
			if at, err = vals[k].AsInt64(); err != nil {
				return err
			}
			k++
			continue
		}
		t := at
		if !gl.params.Window.IsZero() {
			m, err := vals[k+1].AsInt64()
			if err != nil {
				return err
			}
			t = gl.params.Millis(m)
		}
		x, err := excessOf(&vals[k])
		if err != nil {
			return err
		}
		limits[c] = limit{x: x, at: t}
		k++
		if !gl.params.Window.IsZero() {
			k++
		}
	}
	for i, p := range group {
		// Every request of the group has the shape's buckets and limits.
		// One whose caller gave up is left alone, its debits counted.
		owned := p.claim()
		var err error
		for c, gl := range shape {
			if gl.l < 0 {
				continue
			}
			if owned && err == nil {
				lr := &p.req.Buckets[gl.b].Limits[gl.l]
				lr.Observed, err = observedAt(limits[c].x, gl.params, limits[c].at)
			}
			if int64(i) < n {
				limits[c].x = limits[c].x.Add(gl.debit)
			}
		}
		if owned {
			p.deliver(int64(i) < n && err == nil, err)
		}
	}
	return nil
}
