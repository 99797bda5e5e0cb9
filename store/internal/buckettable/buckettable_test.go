package buckettable

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

const t0 int64 = 1_700_000_000_000

var rps = bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 1_000} // full again 1 s after use

func key(entity string) store.BucketKey { return store.BucketKey{Entity: entity, Resource: "api"} }

// request debits amount from each entity's bucket in namespace "ns", all or
// nothing, under params p.
func request(now int64, p bucket.Params, amount int64, entities ...string) *store.ConsumeRequest {
	req := &store.ConsumeRequest{Now: now}
	for _, e := range entities {
		req.Buckets = append(req.Buckets, store.BucketRequest{Key: key(e), Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: amount}}})
	}
	return req
}

// tokens returns the balance of entity's bucket, -1 if there is none.
func tokens(tb *Table, entity string) int64 {
	r := tb.Read("ns", []store.BucketKey{key(entity)})[0]
	if r == nil {
		return -1
	}
	return r.Limits[0].State.Tokens
}

// inShard returns n entities whose buckets fall in shard i of tb.
func inShard(tb *Table, i, n int) []string {
	var out []string
	for c := 0; len(out) < n; c++ {
		if e := "e" + strconv.Itoa(c); shardOf(tb.hash(ID{"ns", e, "api"})) == i {
			out = append(out, e)
		}
	}
	return out
}

// drained is what one Drain handed over.
type drained struct {
	puts map[string]int64 // entity -> tokens of its first limit
	gone []string         // entities
}

func drain(tb *Table) drained {
	d := drained{puts: map[string]int64{}}
	tb.Drain(func(c Change, rec *store.Record) {
		if _, dup := d.puts[c.ID.Entity]; dup {
			panic("Drain handed " + c.ID.Entity + " over twice")
		}
		d.puts[c.ID.Entity] = rec.Limits[0].State.Tokens
	}, func(id ID) { d.gone = append(d.gone, id.Entity) }, func(string, string, *store.LeaseRecord) {})
	slices.Sort(d.gone)
	return d
}

func modes(t *testing.T, f func(t *testing.T, track bool)) {
	for _, track := range []bool{false, true} {
		t.Run("track="+strconv.FormatBool(track), func(t *testing.T) { f(t, track) })
	}
}

// Consume is all or nothing over its buckets, whatever their shards.
func TestConsumeAllOrNothing(t *testing.T) {
	cases := []struct {
		name     string
		before   map[string]int64 // entity -> amount consumed first
		entities []string
		amount   int64
		granted  bool
		after    map[string]int64 // entity -> tokens, -1: no bucket
	}{
		{name: "single granted", entities: []string{"a"}, amount: 4_000, granted: true,
			after: map[string]int64{"a": 6_000}},
		{name: "single refused", before: map[string]int64{"a": 8_000}, entities: []string{"a"}, amount: 4_000,
			after: map[string]int64{"a": 2_000}},
		{name: "cascade granted", entities: []string{"a", "b", "c"}, amount: 4_000, granted: true,
			after: map[string]int64{"a": 6_000, "b": 6_000, "c": 6_000}},
		{name: "cascade refused by its last bucket", before: map[string]int64{"c": 8_000}, entities: []string{"a", "b", "c"}, amount: 4_000,
			after: map[string]int64{"a": 10_000, "b": 10_000, "c": 2_000}},
		{name: "cascade refused by its first bucket", before: map[string]int64{"a": 8_000}, entities: []string{"a", "b"}, amount: 4_000,
			after: map[string]int64{"a": 2_000, "b": 10_000}},
		{name: "empty request", granted: true, after: map[string]int64{"a": -1}},
	}
	modes(t, func(t *testing.T, track bool) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				tb := New(Options{Track: track})
				for e, amount := range c.before {
					if ok, err := tb.Consume("ns", request(t0, rps, amount, e)); !ok || err != nil {
						t.Fatalf("before: Consume(%s) = %v, %v", e, ok, err)
					}
				}
				req := request(t0, rps, c.amount, c.entities...)
				ok, err := tb.Consume("ns", req)
				if ok != c.granted || err != nil {
					t.Errorf("Consume = %v, %v; want %v", ok, err, c.granted)
				}
				for i, e := range c.entities {
					if got, want := req.Buckets[i].Limits[0].Observed.Tokens, 10_000-c.before[e]; got != want {
						t.Errorf("%s observed %d, want %d", e, got, want)
					}
				}
				for e, want := range c.after {
					if got := tokens(tb, e); got != want {
						t.Errorf("%s holds %d, want %d", e, got, want)
					}
				}
			})
		}
	})
}

// Cascades lock their shards in index order, whatever the order of their
// buckets: two goroutines consuming {a, b} and {b, a} never deadlock, and
// neither do they with a Drain running (cut, then one shard at a time).
// Every debit lands exactly once.
func TestCascadeLockOrder(t *testing.T) {
	huge := bucket.Params{Capacity: 1 << 50, Amount: 1, Period: 1 << 40}
	const perWorker = 2_000
	modes(t, func(t *testing.T, track bool) {
		for _, layout := range []string{"different shards", "same shard"} {
			t.Run(layout, func(t *testing.T) {
				tb := New(Options{Track: track})
				a, b := "a", ""
				switch layout {
				case "same shard":
					b = inShard(tb, shardOf(tb.hash(ID{"ns", a, "api"})), 2)[1]
				default:
					for c := 0; b == ""; c++ {
						if e := "b" + strconv.Itoa(c); shardOf(tb.hash(ID{"ns", e, "api"})) != shardOf(tb.hash(ID{"ns", a, "api"})) {
							b = e
						}
					}
				}
				var wg sync.WaitGroup
				for _, order := range [][]string{{a, b}, {b, a}} {
					wg.Go(func() {
						for range perWorker {
							if ok, err := tb.Consume("ns", request(t0, huge, 1_000, order...)); !ok || err != nil {
								t.Errorf("Consume(%v) = %v, %v", order, ok, err)
								return
							}
						}
					})
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				deadline := time.After(30 * time.Second)
				for running := true; running; {
					select {
					case <-done:
						running = false
					case <-deadline:
						t.Fatal("cascades over {a, b} and {b, a} still running after 30s: deadlock")
					default:
						if track {
							drain(tb)
						} else {
							time.Sleep(time.Millisecond)
						}
					}
				}
				for _, e := range []string{a, b} {
					if got, want := tokens(tb, e), huge.Capacity-2*perWorker*1_000; got != want {
						t.Errorf("%s holds %d, want %d", e, got, want)
					}
				}
			})
		}
	})
}

// What Drain hands over is a consistent cut: replaying every Drain, the
// organisation's bucket is always debited exactly as much as its two
// children together, while cascades run.
func TestDrainIsConsistentCut(t *testing.T) {
	huge := bucket.Params{Capacity: 1 << 50, Amount: 1, Period: 1 << 40}
	tb := New(Options{Track: true})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			child := []string{"key-a", "key-b"}[w%2]
			for range 2_000 {
				if ok, err := tb.Consume("ns", request(t0, huge, 1_000, child, "org")); !ok || err != nil {
					t.Errorf("Consume = %v, %v", ok, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	file := map[string]int64{"key-a": huge.Capacity, "key-b": huge.Capacity, "org": huge.Capacity}
	drains := 0
	for running := true; running; drains++ {
		select {
		case <-done:
			running = false
		default:
		}
		for e, tok := range drain(tb).puts {
			file[e] = tok
		}
		used := func(e string) int64 { return huge.Capacity - file[e] }
		if used("org") != used("key-a")+used("key-b") {
			t.Fatalf("drain %d: org used %d, children %d + %d", drains, used("org"), used("key-a"), used("key-b"))
		}
	}
	t.Logf("%d drains", drains)
}

// A tracking table hands each change over once, with the state it has at
// the Drain; forgotten buckets as gone; deleted and loaded ones not at all.
// Requeue lists a change again unless its bucket left the table.
func TestDrain(t *testing.T) {
	tb := New(Options{Track: true})
	mustConsume := func(req *store.ConsumeRequest) {
		t.Helper()
		if ok, err := tb.Consume("ns", req); !ok || err != nil {
			t.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	mustConsume(request(t0, rps, 1_000, "a"))
	mustConsume(request(t0, rps, 1_000, "a"))
	mustConsume(request(t0, rps, 2_000, "b", "c"))
	mustConsume(request(t0, rps, 1_000, "gone-soon"))
	tb.Put(ID{"ns", "loaded", "api"}, store.Record{Refilled: t0, Limits: []store.LimitState{{Name: "rps", Params: rps, State: bucket.Full(rps)}}})
	if err := tb.ApplyDeltas("ns", []store.Delta{
		{Key: key("a"), Limit: "rps", Amount: 500},
		{Key: key("missing"), Limit: "rps", Amount: 500},
		{Key: key("loaded"), Limit: "no-such-limit", Amount: 500},
	}); err != nil {
		t.Fatal(err)
	}
	if n := tb.Delete(func(id ID) bool { return id.Entity == "c" }); n != 1 {
		t.Errorf("Delete removed %d buckets, want 1", n)
	}
	d := drain(tb)
	if want := map[string]int64{"a": 7_500, "b": 8_000, "gone-soon": 9_000}; !mapsEqual(d.puts, want) || len(d.gone) != 0 {
		t.Fatalf("first Drain: puts %v, gone %v; want %v and none (c deleted, loaded unchanged)", d.puts, d.gone, want)
	}
	if d := drain(tb); len(d.puts) != 0 || len(d.gone) != 0 {
		t.Fatalf("second Drain with no change in between: %+v", d)
	}

	// Ten seconds later every bucket is full again: forget them all but b.
	mustConsume(request(t0+10_000, rps, 3_000, "b"))
	var changes []Change
	tb.Drain(func(c Change, _ *store.Record) { changes = append(changes, c) }, func(ID) {}, func(string, string, *store.LeaseRecord) {})
	tb.Sweep(t0 + 10_000)
	if got := tb.Len(); got != 1 {
		t.Fatalf("%d buckets after the sweep, want 1 (b)", got)
	}
	d = drain(tb)
	if want := []string{"a", "gone-soon", "loaded"}; len(d.puts) != 0 || !slices.Equal(d.gone, want) {
		t.Fatalf("Drain after the sweep: puts %v, gone %v; want none and %v", d.puts, d.gone, want)
	}

	// A failed write gives its changes back: b again, with its state by
	// the next Drain; a forgotten bucket as gone again.
	if len(changes) != 1 || changes[0].ID.Entity != "b" {
		t.Fatalf("drained %+v, want b", changes)
	}
	tb.Requeue(changes[0])
	tb.Requeue(changes[0]) // listed once however often
	tb.RequeueGone(ID{"ns", "a", "api"})
	mustConsume(request(t0+10_000, rps, 1_000, "b"))
	d = drain(tb)
	if want := map[string]int64{"b": 6_000}; !mapsEqual(d.puts, want) || !slices.Equal(d.gone, []string{"a"}) {
		t.Fatalf("Drain after Requeue: puts %v, gone %v; want %v and [a]", d.puts, d.gone, want)
	}
	// A bucket that left the table is never handed over again.
	tb.Delete(func(id ID) bool { return id.Entity == "b" })
	tb.Requeue(changes[0])
	if d := drain(tb); len(d.puts) != 0 || len(d.gone) != 0 {
		t.Fatalf("Drain after requeueing a deleted bucket: %+v", d)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A table without Track lists nothing: Drain hands nothing over.
func TestUntrackedDrainsNothing(t *testing.T) {
	tb := New(Options{})
	tb.Consume("ns", request(t0, rps, 1_000, "a"))
	tb.Consume("ns", request(t0, rps, 1_000, "b", "c"))
	tb.ApplyDeltas("ns", []store.Delta{{Key: key("a"), Limit: "rps", Amount: 500}})
	tb.Sweep(t0 + 10_000)
	if d := drain(tb); len(d.puts) != 0 || len(d.gone) != 0 {
		t.Errorf("Drain of an untracked table: %+v", d)
	}
	if n := tb.Len(); n != 0 {
		t.Errorf("%d buckets after sweeping full ones, want 0", n)
	}
}

// The sweep forgets exactly the buckets full at its time.
func TestSweepForgetsFullBuckets(t *testing.T) {
	cases := []struct {
		name   string
		amount int64 // consumed at t0
		debt   int64 // added by a delta at t0
		at     int64 // sweep time after t0
		kept   bool
	}{
		{name: "untouched", at: 0},
		{name: "refilled", amount: 4_000, at: 10_000},
		{name: "just refilled", amount: 4_000, at: 400},
		{name: "refilling", amount: 4_000, at: 399, kept: true},
		{name: "in debt", amount: 10_000, debt: 50_000, at: 5_000, kept: true},
		{name: "debt repaid", amount: 10_000, debt: 50_000, at: 6_000},
		{name: "clock behind", amount: 4_000, at: -10_000, kept: true},
	}
	modes(t, func(t *testing.T, track bool) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				tb := New(Options{Track: track})
				if ok, err := tb.Consume("ns", request(t0, rps, c.amount, "x")); !ok || err != nil {
					t.Fatalf("Consume = %v, %v", ok, err)
				}
				if err := tb.ApplyDeltas("ns", []store.Delta{{Key: key("x"), Limit: "rps", Amount: c.debt}}); err != nil {
					t.Fatal(err)
				}
				drain(tb)
				tb.Sweep(t0 + c.at)
				if kept := tokens(tb, "x") != -1; kept != c.kept {
					t.Errorf("kept = %v, want %v", kept, c.kept)
				}
				var wantGone []string
				if track && !c.kept {
					wantGone = []string{"x"}
				}
				if d := drain(tb); !slices.Equal(d.gone, wantGone) {
					t.Errorf("Drain after the sweep: gone %v, want %v", d.gone, wantGone)
				}
			})
		}
	})
}

// A shard sweeps by itself once it has created more buckets than half of
// what it holds, and more than minSweep: memory follows the buckets in use
// at a constant cost per creation.
func TestShardSweepsAfterEnoughCreations(t *testing.T) {
	tb := New(Options{})
	const i, held = 7, 4 * minSweep
	sh := &tb.shards[i]
	ents := inShard(tb, i, minSweep+2*held+1)
	consume := func(now int64, es ...string) {
		t.Helper()
		for _, e := range es {
			if ok, err := tb.Consume("ns", request(now, rps, 1_000, e)); !ok || err != nil {
				t.Fatalf("Consume(%s) = %v, %v", e, ok, err)
			}
		}
	}
	check := func(step string, buckets, created int) {
		t.Helper()
		if sh.n != buckets || sh.created != created {
			t.Fatalf("%s: %d buckets, created %d; want %d and %d", step, sh.n, sh.created, buckets, created)
		}
	}
	// A small shard creates minSweep buckets without sweeping.
	consume(t0, ents[:minSweep]...)
	check("minSweep creations", minSweep, minSweep)
	// Ten seconds later they are full: the next creation sweeps them,
	// keeping the new bucket (in use).
	consume(t0+10_000, ents[minSweep])
	check("one more creation, 10 s later", 1, 0)
	// A shard holding held buckets in use (none full) waits for as many
	// creations before it sweeps again.
	rest := ents[minSweep+1:]
	consume(t0+10_000, rest[:held-1]...)
	tb.Sweep(t0 + 10_000) // nothing is full: only counts from zero again
	check("held buckets, swept", held, 0)
	consume(t0+10_000, rest[held-1:2*held-1]...)
	check("held creations", 2*held, held)
	consume(t0+10_000, rest[2*held-1])
	check("one more creation", 2*held+1, 0)
}

// After Close, changes fail with ErrClosed and change nothing; reads still
// answer.
func TestClose(t *testing.T) {
	modes(t, func(t *testing.T, track bool) {
		tb := New(Options{Track: track})
		tb.Consume("ns", request(t0, rps, 1_000, "a"))
		drain(tb)
		tb.Close()
		for name, req := range map[string]*store.ConsumeRequest{
			"single":  request(t0, rps, 1_000, "a"),
			"new":     request(t0, rps, 1_000, "new"),
			"cascade": request(t0, rps, 1_000, "a", "new"),
		} {
			if ok, err := tb.Consume("ns", req); ok || !errors.Is(err, ErrClosed) {
				t.Errorf("%s: Consume after Close = %v, %v; want ErrClosed", name, ok, err)
			}
		}
		if err := tb.ApplyDeltas("ns", []store.Delta{{Key: key("a"), Limit: "rps", Amount: 1}}); !errors.Is(err, ErrClosed) {
			t.Errorf("ApplyDeltas after Close = %v, want ErrClosed", err)
		}
		if got := tokens(tb, "a"); got != 9_000 {
			t.Errorf("a holds %d after Close, want 9000 (unchanged)", got)
		}
		if got := tokens(tb, "new"); got != -1 {
			t.Errorf("a bucket was created after Close: %d", got)
		}
		if d := drain(tb); len(d.puts) != 0 || len(d.gone) != 0 {
			t.Errorf("Drain after Close: %+v", d)
		}
	})
}

// Read and List return copies, List a sorted page of one namespace and
// resource.
func TestReadAndList(t *testing.T) {
	tb := New(Options{})
	for _, e := range []string{"d", "b", "a", "c"} {
		tb.Consume("ns", request(t0, rps, 1_000, e))
	}
	tb.Consume("other", request(t0, rps, 1_000, "a"))
	tb.Consume("ns", &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: store.BucketKey{Entity: "a", Resource: "web"},
		Limits: []store.LimitRequest{{Name: "rps", Params: rps, Check: true, Amount: 1_000}}}}})

	recs := tb.Read("ns", []store.BucketKey{key("a"), key("missing")})
	if recs[0] == nil || recs[1] != nil {
		t.Fatalf("Read = %v, want a's record and nil", recs)
	}
	recs[0].Limits[0].State.Tokens = 0
	if got := tokens(tb, "a"); got != 9_000 {
		t.Errorf("changing a read record changed the table: %d", got)
	}

	cases := []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"a", "b", "c", "d"}},
		{"", 2, []string{"a", "b"}},
		{"b", 10, []string{"c", "d"}},
		{"d", 10, nil},
	}
	for _, c := range cases {
		page := tb.List("ns", "api", c.after, c.limit)
		var got []string
		for _, b := range page {
			got = append(got, b.Entity)
			b.Record.Limits[0].State.Tokens = 0
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(after %q, limit %d) = %v, want %v", c.after, c.limit, got, c.want)
		}
	}
	if got := tokens(tb, "b"); got != 9_000 {
		t.Errorf("changing a listed record changed the table: %d", got)
	}
}

// Once a bucket exists, consumes and deltas allocate nothing, tracked or
// not.
func TestHotPathDoesNotAllocate(t *testing.T) {
	p := bucket.Params{Capacity: 1 << 40, Amount: 1000, Period: 1000}
	modes(t, func(t *testing.T, track bool) {
		tb := New(Options{Track: track})
		one := request(t0, p, 1_000, "e1")
		cascade := request(t0, p, 1_000, "key", "proj", "org")
		deltas := []store.Delta{{Key: key("e1"), Limit: "rps", Amount: -200}}
		for name, fn := range map[string]func(){
			"single":  func() { one.Now++; tb.Consume("ns", one) },
			"cascade": func() { cascade.Now++; tb.Consume("ns", cascade) },
			"deltas":  func() { tb.ApplyDeltas("ns", deltas) },
		} {
			fn() // create the buckets
			if n := testing.AllocsPerRun(200, fn); n != 0 {
				t.Errorf("%s: %v allocations per call, want 0", name, n)
			}
		}
	})
}

// Buckets whose IDs share a hash are chained in their shard: each is found
// by its own ID, and unlinking one, wherever it sits in the chain, leaves
// the others. (maphash collisions cannot be provoked, so the chain is
// driven with a chosen hash.)
func TestShardChainsEqualHashes(t *testing.T) {
	const h = 42
	ids := []ID{{"ns", "a", "api"}, {"ns", "b", "api"}, {"ns", "a", "web"}, {"other", "a", "api"}}
	for _, drop := range []int{0, 1, 2, 3} {
		sh := shard{buckets: make(map[uint64]*entry)}
		ents := make([]*entry, len(ids))
		for i, id := range ids {
			ents[i] = sh.entry(h, id, t0)
		}
		if sh.n != len(ids) || len(sh.buckets) != 1 {
			t.Fatalf("%d entries under %d hashes, want %d under 1", sh.n, len(sh.buckets), len(ids))
		}
		for i, id := range ids {
			if e := sh.entry(h, id, t0); e != ents[i] {
				t.Errorf("entry(%v) is not the bucket created for it", id)
			}
		}
		if sh.find(h, ID{"ns", "c", "api"}) != nil || sh.find(h+1, ids[0]) != nil {
			t.Error("find returned a bucket for an ID or hash never added")
		}
		sh.unlink(h, ents[drop])
		var seen []ID
		sh.each(func(hh uint64, e *entry) {
			if hh != h {
				t.Errorf("each passed hash %d, want %d", hh, h)
			}
			seen = append(seen, e.id)
		})
		if sh.n != len(ids)-1 || len(seen) != len(ids)-1 {
			t.Errorf("drop %d: n = %d, each visited %d; want %d", drop, sh.n, len(seen), len(ids)-1)
		}
		for i, id := range ids {
			if got := sh.find(h, id); (got == nil) != (i == drop) || (got != nil && got != ents[i]) {
				t.Errorf("drop %d: find(%v) = %p, want %v", drop, id, got, map[bool]string{true: "nil", false: "its bucket"}[i == drop])
			}
		}
		for _, e := range ents {
			if e != ents[drop] {
				sh.unlink(h, e)
			}
		}
		if sh.n != 0 || len(sh.buckets) != 0 {
			t.Errorf("drop %d: %d entries under %d hashes after unlinking all, want none", drop, sh.n, len(sh.buckets))
		}
	}
}

// TestConsumeHint checks that the entry a request keeps in Hint is used
// only while it is still that key's entry in that table: a request
// reused after its bucket was forgotten, for another key, in another
// namespace, or against another table debits the right bucket, as a
// fresh request would.
func TestConsumeHint(t *testing.T) {
	tb, other := New(Options{}), New(Options{})
	req := request(t0, rps, 4_000, "a")
	consume := func(tb *Table, ns string, now int64) {
		t.Helper()
		req.Now = now
		if ok, err := tb.Consume(ns, req); !ok || err != nil {
			t.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	consume(tb, "ns", t0)
	if req.Buckets[0].Hint == nil {
		t.Fatal("no Hint left after a single-bucket consume")
	}
	consume(tb, "ns", t0) // through the hint
	if got := tokens(tb, "a"); got != 2_000 {
		t.Fatalf("tokens after two debits through one request = %d, want 2000", got)
	}
	// Full again 1 s later: the sweep forgets the bucket, and the hint's
	// entry with it; the next debit starts from a new, full bucket.
	tb.Sweep(t0 + 2_000)
	if got := tokens(tb, "a"); got != -1 {
		t.Fatalf("bucket still there after the sweep: %d tokens", got)
	}
	consume(tb, "ns", t0+2_000)
	if got := tokens(tb, "a"); got != 6_000 {
		t.Errorf("tokens after a debit through a stale hint = %d, want 6000 (a new bucket)", got)
	}
	// The same request for another key, another namespace, another table.
	req.Buckets[0].Key = key("b")
	consume(tb, "ns", t0+2_000)
	if a, b := tokens(tb, "a"), tokens(tb, "b"); a != 6_000 || b != 6_000 {
		t.Errorf("tokens after a debit of b through a's hint: a %d, b %d, want 6000 each", a, b)
	}
	consume(tb, "ns2", t0+2_000)
	if r := tb.Read("ns2", []store.BucketKey{key("b")})[0]; r == nil || r.Limits[0].State.Tokens != 6_000 || tokens(tb, "b") != 6_000 {
		t.Errorf("a debit in ns2 through ns's hint: ns2 %+v, ns %d", r, tokens(tb, "b"))
	}
	consume(other, "ns", t0+2_000)
	if got, mine := tokens(other, "b"), tokens(tb, "b"); got != 6_000 || mine != 6_000 {
		t.Errorf("a debit in another table through this one's hint: that table %d, this one %d, want 6000 each", got, mine)
	}
}
