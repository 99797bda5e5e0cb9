package dynamodb

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

const ttlT0 = 1_700_000_000_000 // ms

// ttlOf reads a bucket item's ttl (-1 if it has none).
func ttlOf(t *testing.T, s *Store, k store.BucketKey, shard int) int64 {
	t.Helper()
	it, err := s.eng().getItem(context.Background(), "ns", &target{key: k, shard: shard})
	if err != nil || it == nil {
		t.Fatalf("read item %v shard %d: %v (nil item: %v)", k, shard, err, it == nil)
	}
	v, err := getN(it, attrTTL)
	if err != nil {
		return -1
	}
	return v
}

func grant(t *testing.T, s *Store, now int64, brs ...store.BucketRequest) {
	t.Helper()
	if ok, err := s.Consume(context.Background(), "ns", &store.ConsumeRequest{Now: now, Buckets: brs}); err != nil || !ok {
		t.Fatalf("Consume at %+d ms: granted %v, err %v", now-ttlT0, ok, err)
	}
}

// Every write keeps ttl at or after the moment the bucket is full again
// plus the bucket TTL, never lowers it, and moves it by what each path
// promises (ttl.go).
func TestBucketTTL(t *testing.T) {
	ctx := context.Background()
	const grace = 10 * 60 * 1000 // ms
	const fill = 60_000          // ms: 60 tokens at 1 a second
	s := newTable(t, WithBucketTTL(grace*time.Millisecond))
	k := store.BucketKey{Entity: "e", Resource: "api"}
	rpm := bucket.Params{Capacity: 60_000, Amount: 1_000, Period: 1_000} // 60 tokens, 1 per second
	req := func(amount int64) store.BucketRequest {
		return store.BucketRequest{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: rpm, Check: true, Amount: amount}}}
	}
	sec := func(ms int64) int64 { return (ms + 999) / 1000 }
	want := func(step string, v int64) {
		t.Helper()
		if got := ttlOf(t, s, k, 0); got != v {
			t.Fatalf("%s: ttl %d, want %d (%+d s)", step, got, v, got-v)
		}
	}

	grant(t, s, ttlT0, req(30_000))
	want("create, 30 of 60 taken: exact", sec(ttlT0+30_000+grace))

	// A debit by addition knows only that the balance it leaves is not
	// negative: full within the time to fill from empty.
	grant(t, s, ttlT0+1_000, req(6_000))
	want("a debit", sec(ttlT0+1_000+fill+grace))
	base := sec(ttlT0 + 1_000 + fill + grace)

	if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: 10_000, Params: rpm}}); err != nil {
		t.Fatal(err)
	}
	want("debt of 10 tokens at 1/s", base+10)

	if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: -5_000, Params: rpm}}); err != nil {
		t.Fatal(err)
	}
	want("refund", base+10)

	// Without parameters, the item's own (its image here) time the debt.
	if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: 1_000}}); err != nil {
		t.Fatal(err)
	}
	want("debt without parameters", base+11)

	// 100 s later the bucket is full: the write sets its full tick afresh,
	// knows when it is full again (1 s), and raises ttl to that.
	now := int64(ttlT0 + 100_000)
	grant(t, s, now, req(1_000))
	want("a debit of a full bucket: exact", sec(now+1_000+grace))

	// An item past its ttl (as DynamoDB's TTL process may not have deleted
	// it yet): the write planned from the image (whose ttl is later) fails
	// its condition on ttl, and the write from the item returned raises
	// ttl into the future again.
	if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: shardKey("ns", k, 0),
		UpdateExpression:          aws.String("SET #ttl = :past"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: item{":past": num(now/1000 - 1)},
	}); err != nil {
		t.Fatal(err)
	}
	now += 500 // 59.5 tokens
	grant(t, s, now, req(1_000))
	want("write to an expired item", sec(now+fill+grace))

	// The consumed counter survived all of it: the usage stream sees one
	// item, never a recreated one.
	it, _ := s.eng().getItem(ctx, "ns", &target{key: k})
	if tc := attrN(it, limitAttr("rpm", fieldConsumed)); tc != 44_000 {
		t.Errorf("consumed counter %d, want 44000 (30+6+10-5+1+1+1 tokens)", tc)
	}
}

// attrN reads a number attribute, 0 if absent.
func attrN(it item, name string) int64 {
	v, _ := getN(it, name)
	return v
}

// A bucket whose concurrency slot has been taken never gets a finite ttl
// again (the ttl never decreases); one whose concurrency limit was never
// used expires as a rate-only bucket does.
func TestBucketTTLConcurrency(t *testing.T) {
	const grace = 60_000
	s := newTable(t, WithBucketTTL(grace*time.Millisecond))
	rpm := bucket.Params{Capacity: 60_000, Amount: 1_000, Period: 1_000}
	inflight := bucket.Params{Capacity: 2_000}
	req := func(k store.BucketKey, rate, slots int64) store.BucketRequest {
		return store.BucketRequest{Key: k, Limits: []store.LimitRequest{
			{Name: "rpm", Params: rpm, Check: true, Amount: rate},
			{Name: "inflight", Params: inflight, Check: slots > 0, Amount: slots},
		}}
	}
	k := store.BucketKey{Entity: "e", Resource: "jobs"}
	grant(t, s, ttlT0, req(k, 1_000, 1_000))
	if got := ttlOf(t, s, k, 0); got != ttlNever {
		t.Fatalf("ttl with a slot taken: %d, want never (%d)", got, ttlNever)
	}
	if err := s.ApplyDeltas(context.Background(), "ns", []store.Delta{{Key: k, Limit: "inflight", Amount: -1_000, Params: inflight}}); err != nil {
		t.Fatal(err)
	}
	grant(t, s, ttlT0+100_000, req(k, 1_000, 0))
	if got := ttlOf(t, s, k, 0); got != ttlNever {
		t.Fatalf("ttl after the slot's return and a rate debit: %d, want never", got)
	}

	free := store.BucketKey{Entity: "f", Resource: "jobs"}
	grant(t, s, ttlT0, req(free, 1_000, 0))
	if got, want := ttlOf(t, s, free, 0), int64((ttlT0+1_000+grace+999)/1000); got != want {
		t.Fatalf("ttl with no slot ever taken: %d, want %d", got, want)
	}
}

// Under a random mix of acquires (refused and granted, from a warm image
// and from items never seen), debts, refunds and splits, every item of a
// bucket keeps ttl at or after the moment its limits are full again plus
// the bucket TTL.
func TestBucketTTLBoundHolds(t *testing.T) {
	ctx := context.Background()
	const grace = 5_000
	s := newTable(t, WithBucketTTL(grace*time.Millisecond), WithWritePressureLimit(20))
	k := store.BucketKey{Entity: "e", Resource: "api"}
	rpm := bucket.Params{Capacity: 200_000, Amount: 50_000, Period: 1_000} // 200 tokens, 50/s
	tpm := bucket.Params{Capacity: 1_000_000, Amount: 20_000, Period: 60}
	rng := rand.New(rand.NewPCG(1, 2))
	now := int64(ttlT0)
	var finite, checked int
	grant(t, s, now, store.BucketRequest{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: rpm, Check: true, Amount: 1_000}}})
	for step := range 300 {
		now += rng.Int64N(40)
		amount := rng.Int64N(5) * 1_000
		switch op := rng.IntN(10); {
		case op == 0:
			s.eng().forget(func(string, store.BucketKey) bool { return true }) // a cold store
		case op < 7:
			br := store.BucketRequest{Key: k, Limits: []store.LimitRequest{
				{Name: "rpm", Params: rpm, Check: true, Amount: amount},
				{Name: "tpm", Params: tpm, Check: true, Amount: amount * 7},
			}}
			if _, err := s.Consume(ctx, "ns", &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{br}}); err != nil {
				t.Fatalf("step %d: Consume: %v", step, err)
			}
		case op < 9:
			if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "tpm", Amount: amount * 3, Params: tpm}}); err != nil {
				t.Fatalf("step %d: ApplyDeltas: %v", step, err)
			}
		default:
			if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: -amount, Params: rpm}}); err != nil {
				t.Fatalf("step %d: ApplyDeltas: %v", step, err)
			}
		}
		first, err := s.eng().getItem(ctx, "ns", &target{key: k})
		if err != nil || first == nil {
			t.Fatalf("step %d: read: %v", step, err)
		}
		for shard := range shardCount(first) {
			it, err := s.eng().getItem(ctx, "ns", &target{key: k, shard: shard})
			if err != nil || it == nil {
				t.Fatalf("step %d: read shard %d: %v", step, shard, err)
			}
			ttl, err := getN(it, attrTTL)
			if err != nil {
				t.Fatalf("step %d: shard %d has no ttl", step, shard)
			}
			checked++
			if ttl >= ttlNever {
				continue
			}
			finite++
			img, err := itemImage(it)
			if err != nil {
				t.Fatal(err)
			}
			rec := img.record(img.rf)
			if at := ttl*1000 - grace; !store.IsFull(visible(rec), at) {
				t.Fatalf("step %d: shard %d expires at %d but is not full %d ms before: %+v", step, shard, ttl, grace, rec)
			}
		}
	}
	if s.eng().splits.Load() == 0 {
		t.Error("the bucket never split; the test should cover split shards")
	}
	// Most items must carry a real expiry, not just "never".
	if finite < checked/2 {
		t.Errorf("only %d of %d item states had a finite ttl", finite, checked)
	}
	t.Logf("%d item states checked, %d with a finite ttl, %d splits", checked, finite, s.eng().splits.Load())
}

// Bucket items carry their entity's parent and cascade flag.
func TestBucketEntityAttributes(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	lim, adm := limitertest.Planes(t, s, time.Second)
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	for _, id := range []string{"key", "stranger"} {
		lease, err := lim.Acquire(ctx, id, "api", tollgate.Consume{"rpm": 1}, limits)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		entity, parent string
		cascade        bool
	}{{"key", "org", true}, {"org", "", false}, {"stranger", "", false}} {
		it, err := s.eng().getItem(ctx, mustNamespaceID(t, s, lim.Namespace()), &target{key: store.BucketKey{Entity: c.entity, Resource: "api"}})
		if err != nil || it == nil {
			t.Fatalf("%s: read bucket: %v", c.entity, err)
		}
		if got := getS(it, attrParent); got != c.parent {
			t.Errorf("%s: parent_id %q, want %q", c.entity, got, c.parent)
		}
		if _, ok := it[attrCascade]; !ok || getBool(it, attrCascade) != c.cascade {
			t.Errorf("%s: cascade %v (present %v), want %v", c.entity, getBool(it, attrCascade), ok, c.cascade)
		}
	}

	// An item written before its entity was known is described by the
	// next write.
	k := store.BucketKey{Entity: "late", Resource: "api"}
	p := bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000} // 100/min
	br := store.BucketRequest{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: 1_000}}}
	grant(t, s, ttlT0, br)
	br.Entity = &model.Entity{ID: "late", ParentID: "org", Cascade: true}
	grant(t, s, ttlT0+1, br)
	it, _ := s.eng().getItem(ctx, "ns", &target{key: k})
	if getS(it, attrParent) != "org" || !getBool(it, attrCascade) {
		t.Errorf("after a normal write: parent_id %q cascade %v, want org true", getS(it, attrParent), getBool(it, attrCascade))
	}
}
