package stream

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/store"
)

// A table no aggregator ran on has no mark; Read writes one when it
// starts, naming its shard lease owner, and the Lambda function's write
// (WriteAggregatorMark) replaces it.
func TestAggregatorMark(t *testing.T) {
	s := newStreamTable(t)
	ctx := context.Background()
	if m, ok, err := ReadAggregatorMark(ctx, s); err != nil || ok {
		t.Fatalf("a new table's mark: %+v, %v, %v; want none", m, ok, err)
	}
	before := time.Now().Truncate(time.Millisecond)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	noop := func(context.Context, []store.Change) error { return nil }
	if err := Read(rctx, s, time.Second, noop, WithShardLeaseOwner("reader-1"), func(o *options) { o.onRound = cancel }); err != nil {
		t.Fatal(err)
	}
	m, ok, err := ReadAggregatorMark(ctx, s)
	if err != nil || !ok || m.By != "reader-1" || m.At.Before(before) || m.At.After(time.Now()) {
		t.Fatalf("the mark after Read: %+v, %v, %v; want reader-1's, written between %v and now", m, ok, err, before)
	}
	if err := WriteAggregatorMark(ctx, s, "tollgate-lambda fn"); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := ReadAggregatorMark(ctx, s); err != nil || !ok || m.By != "tollgate-lambda fn" {
		t.Errorf("the mark after the function's: %+v, %v, %v", m, ok, err)
	}
}
