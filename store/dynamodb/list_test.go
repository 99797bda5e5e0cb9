package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

// Listed buckets show the caller's limits only: the hidden write-pressure
// limit every item carries never leaks, sharded or not, and a sharded
// bucket is listed once with its shards summed.
func TestListBucketsHidesPressureLimit(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	hot := store.BucketKey{Entity: "hot", Resource: "api"}
	cold := store.BucketKey{Entity: "cold", Resource: "api"}
	grants := splitTo(t, s, hot, hotParams, hotEpoch, 4)
	if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 1_000, cold)) {
		t.Fatal("refused")
	}
	bs, err := s.ListBuckets(context.Background(), "ns", "api", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"cold": hotParams.Capacity - 1_000, "hot": hotParams.Capacity - grants*1_000}
	if len(bs) != len(want) {
		t.Fatalf("%d buckets listed, want %d: %+v", len(bs), len(want), bs)
	}
	for _, b := range bs {
		ls := b.Record.Limits
		if len(ls) != 1 || ls[0].Name != "rpm" {
			t.Errorf("%s listed with limits %+v; want rpm alone (no hidden limit)", b.Entity, ls)
			continue
		}
		if ls[0].Params != hotParams || ls[0].State.Tokens != want[b.Entity] {
			t.Errorf("%s listed as %+v; want %+v holding %d", b.Entity, ls[0], hotParams, want[b.Entity])
		}
	}
}
