package dynamodb

import (
	"strconv"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

func testItemID(i int) itemID {
	return itemID{"ns", store.BucketKey{Entity: "e" + strconv.Itoa(i), Resource: "api"}, 0}
}

// The lane table stays within its bound however many items pass through
// it, never drops a lane that is busy, and a dropped lane is not used
// again.
func TestLanesBounded(t *testing.T) {
	const limit = 128
	tb := newLaneTable(limit)
	busy := tb.get(testItemID(0))
	busy.running = true
	queued := tb.get(testItemID(1))
	queued.queue = append(queued.queue, &part{})
	var dropped []*lane
	for i := 2; i < 100_000; i++ {
		if l := tb.get(testItemID(i)); i < 50 {
			dropped = append(dropped, l)
		}
	}
	if n := tb.len(); n > limit+2 {
		t.Errorf("%d lanes after 100,000 items, bound %d", n, limit)
	}
	if tb.lookup(testItemID(0)) != busy || tb.lookup(testItemID(1)) != queued {
		t.Error("a busy lane was dropped")
	}
	gone := 0
	for _, l := range dropped {
		if l.gone {
			gone++
		}
	}
	if gone == 0 {
		t.Error("no early lane was dropped")
	}
	tb.forgetIf(func(id itemID) bool { return id == testItemID(1) })
	if queued.img != nil {
		t.Error("forgetIf kept the image")
	}
}

// The shard counts stay within their bound, only sharded buckets take an
// entry, and forgetting keeps the count exact.
func TestShardCountsBounded(t *testing.T) {
	c := shardCounts{limit: 100}
	id := func(i int) bucketID {
		return bucketID{"ns", store.BucketKey{Entity: "e" + strconv.Itoa(i), Resource: "api"}}
	}
	for i := range 100 {
		c.store(id(i), 2)
		c.store(id(i), 4) // an update is not a new entry
	}
	if n := c.load(id(7)); n != 4 {
		t.Fatalf("load: %d, want 4", n)
	}
	c.store(id(3), 1) // unsharded again: forgotten
	c.forget(id(0))
	c.forget(id(0))
	c.forgetIf(func(b bucketID) bool { return b.k.Entity == "e1" })
	if got := c.n.Load(); got != 97 {
		t.Fatalf("count %d after forgetting 3 of 100, want 97", got)
	}
	if n := c.load(id(0)); n != 1 {
		t.Errorf("a forgotten bucket has %d shards, want 1", n)
	}
	for i := range 4 {
		c.store(id(100+i), 2) // past the limit: start afresh
	}
	if got := c.n.Load(); got > 3 {
		t.Errorf("count %d after passing the limit, want a fresh start", got)
	}
}
