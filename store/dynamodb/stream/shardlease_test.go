package stream

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// withoutRelease makes Read stop as a crash would: its shard leases and
// worker item stay until they expire.
func withoutRelease() Option { return func(o *options) { o.keepLeases = true } }

func testLeaser(s *dynamodb.Store, owner string, clk clock.Clock) *leaser {
	return newLeaser(tableOf(s), newOptions([]Option{WithShardLeaseOwner(owner), WithShardLease(10 * time.Second), WithShardLeaseClock(clk)}))
}

// putLease writes a lease item by hand, as another reader would.
func putLease(t *testing.T, s *dynamodb.Store, shard, owner string, expires time.Time) {
	t.Helper()
	it := leaseKey(shard)
	it["owner"], it["expires"], it[schema.AttrTTL] = schema.Str(owner), schema.Num(expires.UnixMilli()), schema.Num(expires.Add(time.Hour).Unix())
	if _, err := s.Client().PutItem(context.Background(), &ddb.PutItemInput{TableName: aws.String(s.Table()), Item: it}); err != nil {
		t.Fatal(err)
	}
}

// putWorker writes a worker item by hand, as another reader would.
func putWorker(t *testing.T, s *dynamodb.Store, owner string, expires time.Time) {
	t.Helper()
	it := workerKey(owner)
	it["expires"], it[schema.AttrTTL] = schema.Num(expires.UnixMilli()), schema.Num(expires.Add(time.Hour).Unix())
	if _, err := s.Client().PutItem(context.Background(), &ddb.PutItemInput{TableName: aws.String(s.Table()), Item: it}); err != nil {
		t.Fatal(err)
	}
}

func mustState(t *testing.T, s *dynamodb.Store) streamState {
	t.Helper()
	st, err := tableOf(s).streamState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustTake(t *testing.T, l *leaser, shard string, want bool) {
	t.Helper()
	got, err := l.take(context.Background(), shard)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s takes %s: %v, want %v", l.owner, shard, got, want)
	}
}

// The conditional write takes a shard only when it has no lease, has the
// taker's, or has an expired one; renewal extends a lease and finds out
// that it was taken; a lease run out by the holder's clock stops its
// reading; release deletes only one's own lease.
func TestLeaseTakeRenewSteal(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	start := time.UnixMilli(time.Now().UnixMilli())
	clk := clock.NewFake(start)
	me, other := testLeaser(s, "me", clk), testLeaser(s, "other", clk)

	putLease(t, s, "s1", "other", start.Add(5*time.Second))
	mustTake(t, me, "s1", false) // live lease of another
	if me.holds("s1") {
		t.Fatal("holds a shard it could not take")
	}
	clk.Advance(5 * time.Second) // now == expires: expired
	mustTake(t, me, "s1", true)
	if got := mustState(t, s).leases["s1"]; got.owner != "me" || got.expires != clk.Now().Add(10*time.Second).UnixMilli() {
		t.Fatalf("lease after taking an expired one: %+v", got)
	}
	mustTake(t, me, "s1", true) // its own
	mustTake(t, other, "s1", false)

	clk.Advance(3 * time.Second)
	if err := me.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustState(t, s).leases["s1"].expires; got != clk.Now().Add(10*time.Second).UnixMilli() {
		t.Fatalf("renewed lease expires at %d, want %d", got, clk.Now().Add(10*time.Second).UnixMilli())
	}
	if _, ok := mustState(t, s).workers["me"]; !ok {
		t.Fatal("renewal wrote no worker item")
	}

	// Taken by someone else (after a pause of ours, say): the renewal's
	// condition fails and the lease is dropped.
	putLease(t, s, "s1", "thief", clk.Now().Add(time.Minute))
	if err := me.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if me.holding("s1") || me.holds("s1") {
		t.Fatal("still holds a lease whose renewal failed its condition")
	}
	if got := mustState(t, s).leases["s1"].owner; got != "thief" {
		t.Fatalf("renewal overwrote the new owner: %q", got)
	}

	// Renewals that do not happen: by its own clock the holder stops
	// reading when the lease runs out, and another reader takes it.
	mustTake(t, me, "s2", true)
	clk.Advance(10 * time.Second)
	if me.holds("s2") {
		t.Fatal("holds a lease past its expiry")
	}
	mustTake(t, other, "s2", true)
	if err := me.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if me.holding("s2") {
		t.Fatal("kept a lease another reader took after it expired")
	}

	// Release deletes one's own lease, never another's.
	mustTake(t, me, "s3", true)
	if err := me.release(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustState(t, s).leases["s3"]; ok {
		t.Fatal("released lease still in the table")
	}
	mustTake(t, other, "s3", true)
	if err := me.release(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	if got := mustState(t, s).leases["s3"].owner; got != "other" {
		t.Fatalf("release deleted another reader's lease (owner now %q)", got)
	}
	if err := me.releaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustState(t, s).workers["me"]; ok {
		t.Fatal("clean stop left the worker item")
	}
}

// A reader takes at most ceil(readable shards / live readers), counting
// live worker items and lease owners; it sheds the excess when another
// reader appears, and takes expired leases of a dead one.
func TestLeaseFairShare(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	start := time.UnixMilli(time.Now().UnixMilli())
	clk := clock.NewFake(start)
	readable := []string{"a", "b", "c", "d"}
	me, other, third := testLeaser(s, "me", clk), testLeaser(s, "other", clk), testLeaser(s, "third", clk)
	acquireAll := func(l *leaser, want ...string) {
		t.Helper()
		st := mustState(t, s)
		if err := l.plan(ctx, st, readable); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, shard := range readable {
			ok, err := l.acquire(ctx, shard, st)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, shard)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s (fair share %d) holds %v, want %v", l.owner, l.fair, got, want)
		}
	}
	leaseOwners := func() map[string]string {
		out := map[string]string{}
		for shard, ls := range mustState(t, s).leases {
			out[shard] = ls.owner
		}
		return out
	}

	acquireAll(me, "a", "b", "c", "d") // alone: everything
	putWorker(t, s, "other", start.Add(10*time.Second))
	putWorker(t, s, "gone", start.Add(-time.Second)) // expired: not live
	acquireAll(me, "a", "b")                         // two live readers: sheds c and d
	if got := leaseOwners(); len(got) != 2 || got["a"] != "me" || got["b"] != "me" {
		t.Fatalf("leases after shedding: %v", got)
	}
	acquireAll(other, "c", "d") // a and b are live leases of me

	// A third reader finds every shard leased and its share (2) taken by
	// nobody's excess: it waits.
	putWorker(t, s, "third", start.Add(10*time.Second))
	acquireAll(third)
	acquireAll(me, "a", "b")

	// other dies: its leases and worker item expire while me and third
	// renew; third takes its shards.
	clk.Advance(5 * time.Second)
	if err := me.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := third.heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	acquireAll(third, "c", "d")
	acquireAll(me, "a", "b")
	if got := leaseOwners(); got["c"] != "third" || got["d"] != "third" {
		t.Fatalf("leases after other's death: %v", got)
	}

	// A shard that is no longer readable (finished) is released.
	readable = []string{"a", "c", "d"}
	acquireAll(me, "a")
	if _, ok := leaseOwners()["b"]; ok {
		t.Fatal("lease of a finished shard kept")
	}
}

// streamWorkload writes acquires of "key" (100 tokens each, dated within
// one day) whose usage Read must find, and reports the daily usage.
type streamWorkload struct {
	t   *testing.T
	s   *dynamodb.Store
	lim *tollgate.Limiter
	ns  string
}

func newStreamWorkload(t *testing.T, s *dynamodb.Store) *streamWorkload {
	ctx := context.Background()
	clk := clock.NewFake(time.Now().Truncate(time.Hour).Add(30 * time.Minute))
	lim, adm := limitertest.Planes(t, s, time.Second, tollgate.WithClock(clk))
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key"}); err != nil {
		t.Fatal(err)
	}
	ns, err := s.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	return &streamWorkload{t: t, s: s, lim: lim, ns: ns.ID}
}

func (w *streamWorkload) acquire(n int) {
	w.t.Helper()
	for range n {
		le, err := w.lim.Acquire(context.Background(), "key", "llm", tollgate.Consume{"tpm": 100},
			tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000)))
		if err != nil {
			w.t.Fatal(err)
		}
		if err := le.Commit(context.Background()); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *streamWorkload) usage() (events, tpm int64) {
	w.t.Helper()
	snaps, err := w.s.ListUsage(context.Background(), w.ns, store.UsageQuery{Entity: "key", Window: store.Daily, From: 0, To: 1 << 50})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, u := range snaps {
		events += u.Events
		tpm += u.Consumed["tpm"]
	}
	return events, tpm
}

// waitEvents waits until the usage counts at least n acquires.
func (w *streamWorkload) waitEvents(n int64) {
	w.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if e, _ := w.usage(); e >= n {
			return
		}
		time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream
	}
	e, _ := w.usage()
	w.t.Fatalf("usage counts %d acquires after a minute, want %d", e, n)
}

// testReader is one Read call applying usage, counting its batches
// and rounds.
type testReader struct {
	owner  string
	cancel context.CancelFunc
	done   chan error

	stopped sync.Once

	mu      sync.Mutex
	batches int
	minSeq  string        // the lowest sequence number it handled
	round   chan struct{} // closed at the end of the current round
}

func startReader(t *testing.T, s *dynamodb.Store, owner string, opts ...Option) *testReader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &testReader{owner: owner, cancel: cancel, done: make(chan error, 1), round: make(chan struct{})}
	opts = append([]Option{WithShardLeaseOwner(owner), func(o *options) { o.onRound = r.roundEnded }}, opts...)
	go func() {
		r.done <- Read(ctx, s, 50*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
			r.mu.Lock()
			if r.batches++; r.batches == 1 {
				r.minSeq = cs[0].Seq
			}
			r.minSeq = min(r.minSeq, cs[0].Seq)
			r.mu.Unlock()
			return aggregator.Apply(ctx, s, cs, aggregator.DefaultRetention)
		}, opts...)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *testReader) roundEnded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.round)
	r.round = make(chan struct{})
}

// waitRounds returns once the reader has run a whole round that began
// after the call.
func (r *testReader) waitRounds(t *testing.T) {
	t.Helper()
	// The first round to end may have begun before; the second began after it.
	for range 2 {
		r.mu.Lock()
		ended := r.round
		r.mu.Unlock()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Fatalf("reader %s ran no round in a minute", r.owner)
		}
	}
}

func (r *testReader) stop(t *testing.T) {
	t.Helper()
	r.stopped.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("reader %s: %v", r.owner, err)
		}
	})
}

func (r *testReader) stats() (batches int, minSeq string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches, r.minSeq
}

func mustCheckpoint(t *testing.T, s *dynamodb.Store, shard string) string {
	t.Helper()
	cp, err := tableOf(s).checkpoint(context.Background(), shard)
	if err != nil {
		t.Fatal(err)
	}
	return cp.seq
}

// Two readers of a stream with one shard, their leases dated by one fake
// clock: only the lease holder reads; when it crashes the other reads
// nothing until the lease expires by that clock, then goes on from the
// checkpoint; when it stops cleanly the other takes over with the clock
// standing still, so before the lease would have expired; every acquire
// counts once.
func TestLeaseTwoReaders(t *testing.T) {
	s := newStreamTable(t)
	ctx := context.Background()
	w := newStreamWorkload(t, s)
	shards, err := (&streamReader{s: tableOf(s), client: tableOf(s).streamsClient(), arn: mustStreamARN(t, s)}).shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 1 {
		t.Skipf("the stream has %d shards; this test needs DynamoDB Local's one", len(shards))
	}
	shard := aws.ToString(shards[0].ShardId)
	const lease = 3 * time.Second
	clk := clock.NewFake(time.UnixMilli(time.Now().UnixMilli()))
	w.acquire(3)
	a := startReader(t, s, "a", WithShardLease(lease), WithShardLeaseClock(clk), withoutRelease())
	w.waitEvents(3)
	b := startReader(t, s, "b", WithShardLease(lease), WithShardLeaseClock(clk))
	w.acquire(3)
	w.waitEvents(6)
	b.waitRounds(t)
	if n, _ := b.stats(); n != 0 {
		t.Fatalf("b read %d batches while a held the lease", n)
	}

	// a crashes: b reads nothing while a's lease lasts, however many rounds
	// it runs, then goes on from a's checkpoint once the clock passes it.
	a.stop(t)
	held := mustState(t, s).leases[shard]
	if held.owner != "a" || held.expires != clk.Now().Add(lease).UnixMilli() {
		t.Fatalf("lease after a's crash: %+v; want a's, expiring %v after the start", held, lease)
	}
	cp := mustCheckpoint(t, s, shard)
	w.acquire(3)
	b.waitRounds(t)
	if n, _ := b.stats(); n != 0 {
		t.Fatalf("b read %d batches before a's lease expired", n)
	}
	if e, _ := w.usage(); e != 6 {
		t.Fatalf("usage counts %d acquires while nobody read, want 6", e)
	}
	clk.Advance(lease)
	w.waitEvents(9)
	if n, minSeq := b.stats(); n == 0 || minSeq <= cp {
		t.Fatalf("b read %d batches from %s; want some, after a's checkpoint %s", n, minSeq, cp)
	}

	// c starts and reads nothing while b holds the lease; b stops cleanly
	// and c takes over with the clock standing still: b's lease would not
	// have expired.
	c := startReader(t, s, "c", WithShardLease(lease), WithShardLeaseClock(clk))
	w.acquire(3)
	w.waitEvents(12)
	c.waitRounds(t)
	if n, _ := c.stats(); n != 0 {
		t.Fatalf("c read %d batches while b held the lease", n)
	}
	b.stop(t)
	cp = mustCheckpoint(t, s, shard)
	for deadline := time.Now().Add(time.Minute); mustState(t, s).leases[shard].owner != "c"; {
		if time.Now().After(deadline) {
			t.Fatalf("c did not take the lease b released: %+v", mustState(t, s).leases[shard])
		}
		c.waitRounds(t)
	}
	w.acquire(3)
	w.waitEvents(15)
	if n, minSeq := c.stats(); n == 0 || minSeq <= cp {
		t.Fatalf("c read %d batches from %s after taking over; want some, after b's checkpoint %s", n, minSeq, cp)
	}
	c.stop(t)
	if events, tpm := w.usage(); events != 15 || tpm != 15*100_000 {
		t.Fatalf("usage: %d acquires, %d millitokens; want 15 and 1500000", events, tpm)
	}
}

// A reader whose lease is taken (its renewal fails the condition) stops
// reading the shard at the next batch: its checkpoint stays at the batch
// it was handling.
func TestLeaseLostStopsAtNextBatch(t *testing.T) {
	s := newStreamTable(t)
	ctx := context.Background()
	w := newStreamWorkload(t, s)
	w.acquire(4)
	o := newOptions([]Option{WithShardLeaseOwner("me")})
	me := newLeaser(tableOf(s), o)
	var handled []store.Change
	r := newStreamReader(tableOf(s), mustStreamARN(t, s), func(ctx context.Context, cs []store.Change) error {
		if len(handled) == 0 {
			// Another reader takes the lease; the renewal finds out.
			putLease(t, s, sourceShard(cs[0].Source), "thief", time.Now().Add(time.Minute))
			if err := me.renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
		handled = append(handled, cs...)
		return nil
	}, me, o)
	r.batch = 1
	for deadline := time.Now().Add(time.Minute); len(handled) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no change read in a minute")
		}
		progressed, err := r.round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !progressed {
			time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream
		}
	}
	if _, err := r.round(ctx); err != nil { // the thief's lease is live: nothing read
		t.Fatal(err)
	}
	if len(handled) != 1 {
		t.Fatalf("handled %d changes after losing the lease in the first batch, want 1", len(handled))
	}
	cp, err := tableOf(s).checkpoint(ctx, sourceShard(handled[0].Source))
	if err != nil {
		t.Fatal(err)
	}
	if cp.seq != handled[0].Seq {
		t.Fatalf("checkpoint at %s, want the stolen batch's %s", cp.seq, handled[0].Seq)
	}
}
