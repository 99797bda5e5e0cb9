package dynamodb

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

func resetReq(now int64, k store.BucketKey, p bucket.Params, ev *model.AuditEvent) *store.ResetRequest {
	return &store.ResetRequest{Now: now, Bucket: store.BucketRequest{Key: k, Limits: []store.LimitRequest{
		{Name: "rpm", Params: p, Check: true},
	}}, Event: ev}
}

// A reset of a split bucket refills every shard in one transaction with
// its event, after one read of the shards.
func TestResetEveryShardOneTransaction(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second, WithWritePressureLimit(2), WithMaxShards(4))
	ctx := context.Background()
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	p := bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000}
	splitTo(t, c.Store, k, p, hotEpoch, 4)
	if err := c.Penalize(ctx, "ns", &store.PenaltyRequest{Now: hotEpoch, Until: hotEpoch + 60_000, Bucket: resetReq(0, k, p, nil).Bucket}); err != nil {
		t.Fatal(err)
	}
	c.calls.take()
	ev := model.AuditEvent{ID: "01R", Time: instrEpoch, Action: model.ActionLimitReset, Entity: "hot", Resource: "api"}
	if err := c.Reset(ctx, "ns", resetReq(hotEpoch+1000, k, p, &ev)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "Reset of 4 shards", c.calls.take(), map[string]int{"BatchGetItem": 1, "TransactWriteItems": 1})
	for shard := range 4 {
		it, err := tt.admin.eng().getItem(ctx, "ns", &target{key: k, shard: shard})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemTokens(t, it, "rpm", hotEpoch+1000); got != 25_000 {
			t.Errorf("shard %d holds %d millitokens after the reset, want 25000 (full)", shard, got)
		}
	}
	if evs, err := c.ListAudit(ctx, "ns", "hot", "", 10); err != nil || len(evs) != 1 {
		t.Errorf("ListAudit = %v, %v; want the reset's event once", evs, err)
	}
}

// An acquire right after a reset sees the bucket full: in the process
// that reset it with one write and no read (the reset's image replaces
// what it knew), and in another that knew it empty.
func TestAcquireAfterReset(t *testing.T) {
	tt := newTestTable(t)
	c1, c2 := tt.client(t, 5*time.Second), tt.client(t, 5*time.Second)
	t0 := instrEpoch.UnixMilli()
	k := store.BucketKey{Entity: "a", Resource: "r"}
	if !mustConsume(t, c1, "ns", consumeReq(t0, rate100, 100_000, k)) {
		t.Fatal("a new bucket refused its capacity")
	}
	if mustConsume(t, c2, "ns", consumeReq(t0, rate100, 1_000, k)) {
		t.Fatal("an empty bucket granted")
	}
	if err := c1.Reset(context.Background(), "ns", resetReq(t0, k, rate100, nil)); err != nil {
		t.Fatal(err)
	}
	c1.calls.take()
	if !mustConsume(t, c1, "ns", consumeReq(t0, rate100, 60_000, k)) {
		t.Fatal("60 of 100 refused right after the reset")
	}
	expectCalls(t, "acquire after the reset", c1.calls.take(), map[string]int{"UpdateItem": 1})
	if !mustConsume(t, c2, "ns", consumeReq(t0, rate100, 40_000, k)) {
		t.Fatal("another process refused the 40 left after the reset")
	}
	if mustConsume(t, c1, "ns", consumeReq(t0, rate100, 1_000, k)) {
		t.Error("granted beyond the capacity after the reset")
	}
}

// A missing bucket is full already: only the event is written.
func TestResetMissingBucket(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ctx := context.Background()
	k := store.BucketKey{Entity: "none", Resource: "r"}
	ev := model.AuditEvent{ID: "01R", Time: instrEpoch, Action: model.ActionLimitReset, Entity: "none"}
	if err := c.Reset(ctx, "ns", resetReq(instrEpoch.UnixMilli(), k, rate100, &ev)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "Reset of a missing bucket", c.calls.take(), map[string]int{"GetItem": 1, "PutItem": 1})
	if it, err := tt.admin.eng().getItem(ctx, "ns", &target{key: k}); err != nil || it != nil {
		t.Errorf("bucket item after the reset = %v, %v; want none", it, err)
	}
}

// The reset's transaction is conditioned on the parameters its read
// found: when they changed in between (here, the read is made to show
// others), it reads again and succeeds. A cancelled transaction (a
// conflict) is retried too.
func TestResetRetries(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second, withSleep((&sleepRecorder{}).sleep))
	ctx := context.Background()
	t0 := instrEpoch.UnixMilli()
	k := store.BucketKey{Entity: "a", Resource: "r"}
	if !mustConsume(t, c, "ns", consumeReq(t0, rate100, 100_000, k)) {
		t.Fatal("refused")
	}
	var edits atomic.Int32
	c.net.editResponse("GetItem", func(b []byte) []byte {
		if edits.Add(1) > 1 {
			return b
		}
		return bytes.Replace(b, []byte(`"b_rpm_cp":{"N":"100000"}`), []byte(`"b_rpm_cp":{"N":"90000"}`), 1)
	})
	c.calls.take()
	if err := c.Reset(ctx, "ns", resetReq(t0, k, rate100, nil)); err != nil {
		t.Fatal(err)
	}
	c.net.heal()
	if edits.Load() < 2 {
		t.Fatalf("the edit met %d reads, want the second read to be untouched", edits.Load())
	}
	expectCalls(t, "reset after a lost race", c.calls.take(), map[string]int{"GetItem": 2, "TransactWriteItems": 2})
	if got := balanceAt(t, tt.admin, "ns", k, "rpm", t0); got != 100_000 {
		t.Errorf("balance after the reset = %d, want 100000", got)
	}

	if !mustConsume(t, c, "ns", consumeReq(t0, rate100, 100_000, k)) {
		t.Fatal("refused")
	}
	c.net.fail(faultRule{op: "TransactWriteItems", times: 1, kind: faultTxConflict})
	if err := c.Reset(ctx, "ns", resetReq(t0, k, rate100, nil)); err != nil {
		t.Fatalf("Reset after a conflict: %v", err)
	}
	if _, inj := c.net.take(); inj["TransactWriteItems"] != 1 {
		t.Errorf("%d conflicts injected, want 1", inj["TransactWriteItems"])
	}
	c.net.heal()
	if got := balanceAt(t, tt.admin, "ns", k, "rpm", t0); got != 100_000 {
		t.Errorf("balance after the retried reset = %d, want 100000", got)
	}
}
