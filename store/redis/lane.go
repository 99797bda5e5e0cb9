package redis

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/tollgate-rl/tollgate/store"
)

// Lanes: the acquires of one process on one bucket share calls. While a
// call of a bucket's lane is in flight, the acquires that arrive queue,
// and go out together in the next call (one luaConsume of many requests,
// each all or nothing, in arrival order), so a hot bucket costs one round
// trip per batch rather than per acquire. An acquire on an idle lane is
// sent at once, by its own goroutine.

// maxBatch bounds the requests of one call.
const maxBatch = 128

// laneShards spreads the lanes over independently locked maps.
const laneShards = 64

// lanes are a Store's lanes, by namespace and first bucket. A lane exists
// while it has a call in flight, so the maps hold only busy buckets.
type lanes struct {
	seed   maphash.Seed
	shards [laneShards]laneShard
}

type laneShard struct {
	mu    sync.Mutex
	lanes map[string]*lane
}

// lane is one bucket's queue: the acquires waiting for the call in flight
// to end. The shard's lock guards it.
type lane struct {
	queue []*pending
}

// pending is one acquire in a lane.
type pending struct {
	ctx     context.Context
	req     *store.ConsumeRequest
	granted bool
	err     error
	done    chan struct{}
}

func newLanes() *lanes {
	l := &lanes{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].lanes = make(map[string]*lane)
	}
	return l
}

// submit runs req in the lane of its first bucket: at once if the lane is
// idle (and then the batches that queued meanwhile, in a goroutine of
// their own), else in the lane's next call.
func (ls *lanes) submit(ctx context.Context, s *Store, ns string, req *store.ConsumeRequest) (bool, error) {
	k := req.Buckets[0].Key
	id := ns + "|" + k.Entity + "|" + k.Resource
	sh := &ls.shards[maphash.String(ls.seed, id)%laneShards]
	p := &pending{ctx: ctx, req: req}
	sh.mu.Lock()
	if l, busy := sh.lanes[id]; busy {
		p.done = make(chan struct{})
		l.queue = append(l.queue, p)
		sh.mu.Unlock()
		select {
		case <-p.done:
			return p.granted, p.err
		case <-ctx.Done():
			// The batch may still debit it: a timed-out acquire may cost
			// tokens, and never admits beyond a limit.
			return false, ctx.Err()
		}
	}
	sh.lanes[id] = &lane{}
	sh.mu.Unlock()
	s.runBatch(ns, []*pending{p})
	ls.next(s, sh, id, ns)
	return p.granted, p.err
}

// next sends what queued in lane id while its call was in flight, batch
// after batch in a goroutine, and closes the lane when nothing is left.
func (ls *lanes) next(s *Store, sh *laneShard, id, ns string) {
	sh.mu.Lock()
	l := sh.lanes[id]
	if len(l.queue) == 0 {
		delete(sh.lanes, id)
		sh.mu.Unlock()
		return
	}
	batch := l.take()
	sh.mu.Unlock()
	go func() {
		for {
			s.runBatch(ns, batch)
			for _, p := range batch {
				close(p.done)
			}
			sh.mu.Lock()
			if len(l.queue) == 0 {
				delete(sh.lanes, id)
				sh.mu.Unlock()
				return
			}
			batch = l.take()
			sh.mu.Unlock()
		}
	}()
}

// take removes up to maxBatch requests from the queue.
func (l *lane) take() []*pending {
	n := min(len(l.queue), maxBatch)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	return batch
}

// runBatch sends batch in one call of luaConsume and settles each
// request; a request that must adopt new parameters first is sent again
// alone (consumeAlone).
func (s *Store) runBatch(ns string, batch []*pending) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	keys, args := s.consumeHeader(ns, len(live))
	for _, p := range live {
		keys, args = s.appendRequest(keys, args, ns, p.req, nil)
	}
	// The batch is bounded by the call timeout, not by any one caller's
	// context: a caller that gives up must not fail the others.
	ctx, cancel := s.callContext(context.WithoutCancel(live[0].ctx))
	res, err := s.run(ctx, consumeScript, keys, args).ToArray()
	cancel()
	if err == nil && len(res) != len(live) {
		err = fmt.Errorf("%d answers for %d requests", len(res), len(live))
	}
	for i, p := range live {
		if err != nil {
			p.err = fmt.Errorf("redis: consume: %w", err)
			continue
		}
		done, granted, err := s.settle(p.ctx, ns, p.req, res[i])
		if !done {
			granted, err = s.consumeAlone(p.ctx, ns, p.req, nil)
		}
		p.granted, p.err = granted, err
	}
}
