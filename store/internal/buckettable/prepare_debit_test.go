package buckettable_test

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// TestPrepareDebitIsPrepareThenDebit: the single-bucket path's
// PrepareDebit leaves a record and the request's observations as Prepare
// followed (on success) by Debit does, for new limits, known ones,
// changed parameters, refusals and more limits than its buffer holds.
func TestPrepareDebitIsPrepareThenDebit(t *testing.T) {
	p := func(capacity int64) bucket.Params {
		return bucket.Params{Capacity: capacity, Amount: capacity, Period: 1000}
	}
	limits := func(n int, amount int64, capacity int64) []store.LimitRequest {
		var out []store.LimitRequest
		for i := range n {
			out = append(out, store.LimitRequest{Name: string(rune('a' + i)), Params: p(capacity), Check: true, Amount: amount})
		}
		return out
	}
	cases := []struct {
		name   string
		before []store.LimitState
		req    []store.LimitRequest
		now    int64
	}{
		{name: "new limit", req: limits(1, 1000, 10_000), now: 5},
		{name: "known limit, same ms", before: []store.LimitState{{Name: "a", Params: p(10_000), State: bucket.State{Tokens: 3000}}}, req: limits(1, 1000, 10_000), now: 0},
		{name: "known limit, refill", before: []store.LimitState{{Name: "b", Params: p(10_000)}, {Name: "a", Params: p(10_000), State: bucket.State{Tokens: 3000}}}, req: limits(2, 1000, 10_000), now: 100},
		{name: "refused", before: []store.LimitState{{Name: "a", Params: p(10_000), State: bucket.State{Tokens: 500}}}, req: limits(1, 1000, 10_000), now: 0},
		{name: "changed params", before: []store.LimitState{{Name: "a", Params: p(20_000), State: bucket.State{Tokens: 15_000}}}, req: limits(1, 1000, 10_000), now: 1},
		{name: "zero amount", req: limits(3, 0, 10_000), now: 1},
		{name: "beyond the buffer", req: limits(10, 1000, 10_000), now: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r1 := &store.Record{Limits: append([]store.LimitState(nil), c.before...)}
			r2 := &store.Record{Limits: append([]store.LimitState(nil), c.before...)}
			b1 := &store.BucketRequest{Limits: append([]store.LimitRequest(nil), c.req...)}
			b2 := &store.BucketRequest{Limits: append([]store.LimitRequest(nil), c.req...)}
			ok1 := store.Prepare(r1, b1, c.now)
			if ok1 {
				store.Debit(r1, b1)
			}
			ok2 := store.PrepareDebit(r2, b2, c.now)
			if ok1 != ok2 {
				t.Fatalf("PrepareDebit %v, Prepare %v", ok2, ok1)
			}
			if r1.Refilled != r2.Refilled || len(r1.Limits) != len(r2.Limits) {
				t.Fatalf("records differ: %+v, want %+v", r2, r1)
			}
			for i := range r1.Limits {
				if r1.Limits[i] != r2.Limits[i] {
					t.Errorf("limit %d: %+v, want %+v", i, r2.Limits[i], r1.Limits[i])
				}
			}
			for i := range b1.Limits {
				if b1.Limits[i] != b2.Limits[i] {
					t.Errorf("request limit %d: %+v, want %+v", i, b2.Limits[i], b1.Limits[i])
				}
			}
		})
	}
}
