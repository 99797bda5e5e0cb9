package tollgate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// plannedRequest is what plan leaves in a lease state for the store and
// for the decision that follows: every field of the request and of the
// kinds of its limits.
type plannedRequest struct {
	Now     int64
	Buckets []plannedBucket
	Kinds   []planned
	Shadow  bool
	Holds   bool
}

type plannedBucket struct {
	Entity       string
	Resource     string
	EntityRef    *model.Entity
	Placement    int
	Estimated    bool
	Names        []string
	Params       []bucket.Params
	Check        []bool
	Amount, Wait []int64
	Observed     []bucket.State
}

func snapshotPlan(d *leaseData) plannedRequest {
	p := plannedRequest{Now: d.req.Now, Kinds: append([]planned(nil), d.kinds...), Shadow: d.shadow, Holds: d.holds}
	for _, b := range d.req.Buckets {
		pb := plannedBucket{Entity: b.Key.Entity, Resource: b.Key.Resource, EntityRef: b.Entity,
			Placement: b.Placement, Estimated: b.Estimated}
		for _, lr := range b.Limits {
			pb.Names = append(pb.Names, lr.Name)
			pb.Params = append(pb.Params, lr.Params)
			pb.Check = append(pb.Check, lr.Check)
			pb.Amount = append(pb.Amount, lr.Amount)
			pb.Wait = append(pb.Wait, lr.Wait)
			pb.Observed = append(pb.Observed, lr.Observed)
		}
		p.Buckets = append(p.Buckets, pb)
	}
	return p
}

// TestRefillPlansAsTheLoop: a recycled lease state whose last request had
// the same layout plans the next one by its amounts alone (refill, see
// layoutMemo); whatever the sequence of calls, what it plans is what a
// fresh state, planning every field, plans for the same call. The calls
// change one thing at a time (entity, a cascade, resource, the option's
// limits, the amounts, a reservation, a stored configuration) and often
// nothing, so that both paths run many times.
func TestRefillPlansAsTheLoop(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	lim, err := New(st, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := NewAdmin(st, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entity{{ID: "org"}, {ID: "team", ParentID: "org", Cascade: true}, {ID: "key", ParentID: "team", Cascade: true}} {
		if _, err := adm.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Stored limits for "db" at every level, the organisation's own
	// smaller: an amount that fits the entity's may not fit an ancestor's.
	for scope, limits := range map[Scope][]Limit{
		{Resource: "db"}:                {PerSecond("rps", 50), ConcurrencyLimit("inflight", 3)},
		{Entity: "org", Resource: "db"}: {ConcurrencyLimit("inflight", 2), PerSecond("rps", 10)},
	} {
		if err := adm.SetLimits(ctx, scope, Config{Limits: limits}); err != nil {
			t.Fatal(err)
		}
	}
	options := [][]AcquireOption{
		{WithLimits(PerSecond("rps", 100))},
		{WithLimits(PerSecond("rps", 100), ConcurrencyLimit("inflight", 5))},
		{WithLimits(PerMinute("rpm", 50), PerSecond("rps", 7))},
		{WithLimits(PerSecond("rps", 100)), WithReservation("job-1")},
		{WithLimits(ReservedLimit("gpus", 2), PerSecond("rps", 9))},
		nil, // the stored configuration
	}
	consumes := []Consume{{"rps": 1}, {"rps": 2, "inflight": 1}, {"inflight": 1}, {"rpm": 3},
		{"rps": 1, "rpm": 1}, {"bogus": 1}, {"gpus": 1}, {"rps": 101}, {"rps": 20}, nil}
	entities := []string{"key", "team", "org", "solo", "other"}
	resources := []string{"llm", "db"}

	r := rand.New(rand.NewPCG(1, 2))
	d := lim.getLeaseData()
	var opt, con, ent, res int
	var agreed, refilled, refilledStored int
	for i := range 6000 {
		// Half the time the same call again: the layout in place.
		again := i > 0 && r.IntN(2) == 0
		if !again {
			switch r.IntN(4) {
			case 0:
				opt = r.IntN(len(options))
			case 1:
				con = r.IntN(len(consumes))
			case 2:
				ent = r.IntN(len(entities))
			default:
				res = r.IntN(len(resources))
			}
		}
		if r.IntN(10) == 0 {
			clk.Advance(time.Duration(r.IntN(2000)) * time.Millisecond)
		}
		fresh := newLeaseData(lim)
		now := nanoOf(clk.Now())
		var errs [2]error
		laidOut := d.layout.valid
		for j, s := range []*leaseData{d, fresh} {
			for _, o := range options[opt] {
				o(&s.opts)
			}
			_, errs[j] = lim.plan(ctx, s, entities[ent], resources[res], consumes[con], now)
		}
		if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) {
			t.Fatalf("call %d: the recycled state's plan: %v; a fresh state's: %v", i, errs[0], errs[1])
		}
		if errs[0] == nil {
			if got, want := snapshotPlan(d), snapshotPlan(fresh); !reflect.DeepEqual(got, want) {
				t.Fatalf("call %d (%s/%s, options %d, consume %v): the recycled state planned\n%+v\na fresh state\n%+v",
					i, entities[ent], resources[res], opt, consumes[con], got, want)
			}
			agreed++
			if again && laidOut {
				refilled++ // the same call as the last, planned by refill
				if options[opt] == nil {
					refilledStored++
				}
			}
		}
		lim.countMemoHits(d)
		lim.countMemoHits(fresh)
		d.release()
		d = lim.getLeaseData() // usually d again (under -race, the pool drops some)
	}
	t.Logf("%d plans compared, %d refilled (%d with stored limits)", agreed, refilled, refilledStored)
	if agreed < 500 || refilled < 200 || refilledStored < 50 {
		t.Errorf("%d plans compared, %d of them refilled (%d with stored limits): too few to say much", agreed, refilled, refilledStored)
	}
}

// TestDecisionCountsFollowTheLayout: the decision counters a state looked
// up for a layout's limits serve the calls planned on that layout
// (layoutMemo.counted), and only those: calls alternating between layouts,
// and between amounts naming some of a layout's limits and all of them,
// are each counted for exactly the limits they named.
func TestDecisionCountsFollowTheLayout(t *testing.T) {
	ctx := context.Background()
	lim, err := New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	const huge = 1 << 40
	ab := WithLimits(PerSecond("a", huge), PerSecond("b", huge))
	bc := WithLimits(PerSecond("b", huge), PerSecond("c", huge))
	calls := []struct {
		opt     AcquireOption
		consume Consume
	}{
		{ab, Consume{"b": 1}}, {ab, Consume{"b": 1}}, {ab, Consume{"a": 1, "b": 1}}, {ab, Consume{"a": 1}},
		{bc, Consume{"c": 1}}, {bc, Consume{"b": 1, "c": 1}}, {bc, Consume{"b": 1, "c": 1}}, {ab, Consume{"a": 1}},
		{ab, Consume{"a": 1, "b": 1}}, {bc, Consume{"b": 1}},
	}
	want := map[string]uint64{}
	for range 50 {
		for _, c := range calls {
			le, err := lim.Acquire(ctx, "k", "llm", c.consume, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			for name := range c.consume {
				want[name]++
			}
		}
	}
	got := map[string]uint64{}
	for _, d := range lim.Stats().Decisions {
		if d.Resource == "llm" {
			got[d.Limit] = d.Granted
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("grants counted per limit: %v, want %v", got, want)
	}
}

// TestRefilledPlansCountCacheHits: a request planned by refill reads the
// config cache through the state's memos as the full plan would, and
// counts each of those reads as a hit, once.
func TestRefilledPlansCountCacheHits(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := NewAdmin(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entity{{ID: "org"}, {ID: "key", ParentID: "org", Cascade: true}} {
		if _, err := adm.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.SetLimits(ctx, Scope{Resource: "db"}, Config{Limits: []Limit{PerSecond("rps", 1000)}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    []AcquireOption
		perCall uint64 // the entity of each level, and each level's limits if stored
	}{
		{"stored limits", nil, 4},
		{"the call's own limits", []AcquireOption{WithLimits(PerSecond("rps", 1000))}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			acquire := func() {
				t.Helper()
				le, err := lim.Acquire(ctx, "key", "db", Consume{"rps": 1}, c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				if err := le.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			acquire() // the cache filled
			acquire()
			before := lim.Stats().Cache
			acquire() // through the state's memos, planned by refill
			acquire()
			after := lim.Stats().Cache
			if after.Misses != before.Misses || after.Hits-before.Hits != 2*c.perCall {
				t.Errorf("two more calls: hits %d -> %d, misses %d -> %d; want %d more hits, no misses",
					before.Hits, after.Hits, before.Misses, after.Misses, 2*c.perCall)
			}
		})
	}
}
