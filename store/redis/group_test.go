package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// TestBatchesDecideAsOneByOne sends batches of requests in one call of the
// acquire script, where alike requests go as groups of repeats decided
// together, and the same requests one call each on a namespace of their
// own: every verdict, every observed state and the buckets' states after
// must be the same. The cases run groups out partway (the grants stop
// inside a group), at numbers too wide for doubles (one by one in the
// script), across times (a group per time), with unchecked limits and
// cascades, and with unlike requests between alike ones.
func TestBatchesDecideAsOneByOne(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	const tok = bucket.MilliPerToken
	rate := func(tokens, period int64) bucket.Params {
		return bucket.Params{Capacity: tokens * tok, Amount: tokens * tok, Period: period}
	}
	type req struct {
		dt     int64 // ms after now
		amount int64 // tokens of the checked limits
		org    bool  // cascading into "org"
	}
	same := func(n int, r req) []req {
		rs := make([]req, n)
		for i := range rs {
			rs[i] = r
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		limit  bucket.Params // the key's checked limit, and the org's
		shadow bool          // an unchecked limit debited by every grant
		reqs   []req
	}{
		{"runs-out-in-a-group", rate(10, 60_000), false, same(16, req{0, 1, false})},
		{"wide-numbers", rate(10, 1e13), false, same(16, req{0, 1, false})},
		{"unchecked", rate(10, 60_000), true, same(16, req{0, 1, false})},
		{"cascade", rate(6, 60_000), true, same(10, req{0, 1, true})},
		{"times", rate(5, 1_000), false, append(append(same(6, req{0, 1, false}), same(6, req{300, 1, false})...), same(6, req{900, 1, false})...)},
		{"unlike", rate(12, 60_000), true, append(append(same(4, req{0, 1, false}), req{0, 2, false}, req{0, 1, true}), same(8, req{0, 1, false})...)},
		{"amount-above-capacity", rate(3, 60_000), false, append(same(2, req{0, 1, false}), same(3, req{0, 4, false})...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func() []*store.ConsumeRequest {
				var out []*store.ConsumeRequest
				for _, r := range tc.reqs {
					limits := []store.LimitRequest{{Name: "rps", Params: tc.limit, Check: true, Amount: r.amount * tok}}
					if tc.shadow {
						limits = append(limits, store.LimitRequest{Name: "shadow", Params: rate(1000, 60_000), Amount: r.amount * tok})
					}
					q := &store.ConsumeRequest{Now: now + r.dt, Buckets: []store.BucketRequest{{Key: store.BucketKey{Entity: "k", Resource: "api"}, Limits: limits}}}
					if r.org {
						q.Buckets = append(q.Buckets, store.BucketRequest{Key: store.BucketKey{Entity: "org", Resource: "api"},
							Limits: []store.LimitRequest{{Name: "rps", Params: tc.limit, Check: true, Amount: r.amount * tok}}})
					}
					out = append(out, q)
				}
				return out
			}
			base := fmt.Sprintf("batch-%s-%d", tc.name, time.Now().UnixNano())
			batched, single := build(), build()
			got, err := redis.ConsumeBatch(s, base+"-b", batched)
			if err != nil {
				t.Fatal(err)
			}
			grants := 0
			for i, q := range single {
				want, err := s.Consume(ctx, base+"-s", q)
				if err != nil {
					t.Fatal(err)
				}
				if want {
					grants++
				}
				if got[i] != want {
					t.Errorf("request %d: granted %v in the batch, %v alone", i, got[i], want)
				}
				for b := range q.Buckets {
					for l := range q.Buckets[b].Limits {
						if g, w := batched[i].Buckets[b].Limits[l].Observed, q.Buckets[b].Limits[l].Observed; g != w {
							t.Errorf("request %d, bucket %d, limit %d: observed %+v in the batch, %+v alone", i, b, l, g, w)
						}
					}
				}
			}
			if grants == 0 || grants == len(single) {
				t.Fatalf("%d grants of %d: the case decides nothing", grants, len(single))
			}
			// The states after: an acquire of nothing on each namespace.
			after := func(ns string) *store.ConsumeRequest {
				q := build()[len(tc.reqs)-1]
				q.Now = now + 1000
				for b := range q.Buckets {
					for l := range q.Buckets[b].Limits {
						q.Buckets[b].Limits[l].Amount = 0
					}
				}
				if _, err := s.Consume(ctx, ns, q); err != nil {
					t.Fatal(err)
				}
				return q
			}
			b, o := after(base+"-b"), after(base+"-s")
			for i := range o.Buckets {
				for l := range o.Buckets[i].Limits {
					if g, w := b.Buckets[i].Limits[l].Observed, o.Buckets[i].Limits[l].Observed; g != w {
						t.Errorf("after: bucket %d, limit %d: %+v batched, %+v one by one", i, l, g, w)
					}
				}
			}
		})
	}
}
