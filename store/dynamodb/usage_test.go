package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// usageT0 is the start of an hour (2026-03-01 12:00 UTC), in Unix ms.
var usageT0 = instrEpoch.UnixMilli()

const usageHour = int64(3_600_000)

func TestUsageConformance(t *testing.T) {
	s := newTable(t)
	storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return s })
}

func usageInc(entity, resource string, start int64, source, seq string, events int64, consumed map[string]int64) store.UsageIncrement {
	return store.UsageIncrement{
		Key:      store.UsageKey{Entity: entity, Resource: resource, Window: store.Hourly, Start: start},
		Consumed: consumed, Events: events, Source: source, Seq: seq,
	}
}

func addUsage(t *testing.T, s store.UsageStore, ns string, incs ...store.UsageIncrement) {
	t.Helper()
	if err := s.AddUsage(context.Background(), ns, incs); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
}

func listUsage(t *testing.T, s store.UsageStore, ns string, q store.UsageQuery) []store.UsageSnapshot {
	t.Helper()
	out, err := s.ListUsage(context.Background(), ns, q)
	if err != nil {
		t.Fatalf("ListUsage(%+v): %v", q, err)
	}
	return out
}

// usageLines renders snapshots as entity/resource@hour events counters.
func usageLines(snaps []store.UsageSnapshot) string {
	var b strings.Builder
	for _, s := range snaps {
		fmt.Fprintf(&b, "%s/%s@%d e=%d %v; ", s.Key.Entity, s.Key.Resource, (s.Key.Start-usageT0)/usageHour, s.Events, s.Consumed)
	}
	return b.String()
}

// rawUsage reads a snapshot item as stored.
func rawUsage(t *testing.T, s *Store, ns string, k store.UsageKey) item {
	t.Helper()
	out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &s.table, Key: usageKeyItem(ns, k), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// A replayed batch, and one overlapping what was applied, count once. A
// snapshot's increments go out as one UpdateItem; a replay costs one failed
// UpdateItem per snapshot, an overlapping batch two; nothing is read.
func TestUsageReplayCountsOnce(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	var batch []store.UsageIncrement
	for _, e := range []string{"k1", "k2"} {
		for i := 1; i <= 3; i++ {
			batch = append(batch, usageInc(e, "api", usageT0, "shard-1", fmt.Sprintf("%04d", i), 1, map[string]int64{"rpm": 1000}))
		}
	}
	c.calls.take()
	addUsage(t, c, ns, batch...)
	expectCalls(t, "first delivery", c.calls.take(), map[string]int{"UpdateItem": 2})

	addUsage(t, c, ns, batch...)
	expectCalls(t, "redelivery", c.calls.take(), map[string]int{"UpdateItem": 2})

	// Overlapping: 0003 was applied, 0004 and 0005 are new (0002 too old
	// however it comes); another source has a sequence of its own.
	overlap := []store.UsageIncrement{
		usageInc("k1", "api", usageT0, "shard-1", "0003", 1, map[string]int64{"rpm": 1000}),
		usageInc("k1", "api", usageT0, "shard-1", "0004", 1, map[string]int64{"rpm": 1000}),
		usageInc("k1", "api", usageT0, "shard-2", "0001", 1, map[string]int64{"rpm": 1000}),
		usageInc("k1", "api", usageT0, "shard-1", "0002", 1, map[string]int64{"rpm": 1000}),
		usageInc("k1", "api", usageT0, "shard-1", "0005", 1, map[string]int64{"rpm": 1000}),
	}
	addUsage(t, c, ns, overlap...)
	expectCalls(t, "overlapping batch", c.calls.take(), map[string]int{"UpdateItem": 2})
	addUsage(t, c, ns, overlap...)
	expectCalls(t, "overlapping batch again", c.calls.take(), map[string]int{"UpdateItem": 1})

	got := listUsage(t, c, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour})
	if want := "k1/api@0 e=6 map[rpm:6000]; k2/api@0 e=3 map[rpm:3000]; "; usageLines(got) != want {
		t.Errorf("snapshots %s, want %s", usageLines(got), want)
	}
	it := rawUsage(t, tt.admin, ns, got[0].Key)
	if getS(it, "seq_shard-1") != "0005" || getS(it, "seq_shard-2") != "0001" {
		t.Errorf("stored sequences: shard-1 %q, shard-2 %q", getS(it, "seq_shard-1"), getS(it, "seq_shard-2"))
	}
}

// The SDK retries an UpdateItem whose response was lost after DynamoDB
// applied it; the retry fails its condition and the increment counts once.
func TestUsageLostResponseCountsOnce(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	c.net.fail(faultRule{op: "UpdateItem", times: 1, kind: faultLost})
	addUsage(t, c, ns, usageInc("k", "api", usageT0, "a", "1", 1, map[string]int64{"rpm": 1000}))
	if req, inj := c.net.take(); req["UpdateItem"] != 2 || inj["UpdateItem"] != 1 {
		t.Fatalf("requests %v, injected %v: want one lost response and its retry", req, inj)
	}
	got := listUsage(t, c, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour})
	if want := "k/api@0 e=1 map[rpm:1000]; "; usageLines(got) != want {
		t.Errorf("snapshots %s, want %s", usageLines(got), want)
	}
}

// A snapshot whose write fails for good makes AddUsage fail; the other
// snapshots may have been written. Retrying the batch then applies
// everything exactly once.
func TestUsageFailureThenRetry(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	var batch []store.UsageIncrement
	for _, e := range []string{"k1", "k2"} {
		for i, n := range []int64{1000, 2000, 4000} {
			batch = append(batch, usageInc(e, "api", usageT0, "a", fmt.Sprint(i+1), 1, map[string]int64{"rpm": n}))
		}
	}
	// k2's write fails on every SDK attempt.
	c.net.fail(faultRule{op: "UpdateItem", match: "ENTITY#k2", times: sdkAttempts, kind: faultInternal})
	err := c.AddUsage(context.Background(), ns, batch)
	if err == nil || errors.Is(err, model.ErrInvalid) {
		t.Fatalf("AddUsage through a persistent fault = %v, want a store error", err)
	}
	c.net.heal()
	addUsage(t, c, ns, batch...)
	got := listUsage(t, c, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour})
	if want := "k1/api@0 e=3 map[rpm:7000]; k2/api@0 e=3 map[rpm:7000]; "; usageLines(got) != want {
		t.Errorf("after the retry %s, want %s", usageLines(got), want)
	}
}

// Batches with several sources, out of order, replayed and overlapping,
// leave the same snapshots as the memory store (the reference), with lost
// responses thrown in.
func TestUsageMatchesMemory(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ref := memory.New()
	ns := "ns-" + randomHex(8)
	rng := rand.New(rand.NewPCG(1, 2))
	next := map[string]int{} // per source, the next new Seq
	var sent [][]store.UsageIncrement
	for range 60 {
		var batch []store.UsageIncrement
		if len(sent) > 0 && rng.IntN(4) == 0 {
			batch = sent[rng.IntN(len(sent))] // a redelivery
		} else {
			// Runs of 1 to 3 sources: each goes back over up to 3 Seqs
			// already sent (a redelivery cut differently) and on by up to 5.
			for range 1 + rng.IntN(3) {
				src := fmt.Sprintf("src-%d", rng.IntN(3))
				back, fwd := min(next[src], rng.IntN(4)), 1+rng.IntN(5)
				for seq := next[src] - back; seq < next[src]+fwd; seq++ {
					e := rng.IntN(2)
					in := usageInc(fmt.Sprintf("k%d", e), "api", usageT0, src, fmt.Sprintf("%04d", seq), 1,
						map[string]int64{"rpm": 1 + rng.Int64N(1000)})
					// One retention per snapshot, as the aggregator gives:
					// where retentions differ, this backend also takes those
					// of skipped increments (TestUsageRetention), the memory
					// store does not.
					in.Expires = usageT0 + int64(10+e)*usageHour
					batch = append(batch, in)
				}
				next[src] += fwd
			}
			if rng.IntN(4) == 0 { // out of order
				rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			}
			sent = append(sent, batch)
		}
		if rng.IntN(4) == 0 {
			c.net.fail(faultRule{op: "UpdateItem", times: 1, kind: faultLost})
		}
		addUsage(t, ref, ns, batch...)
		addUsage(t, c, ns, batch...)
		c.net.heal()
	}
	q := store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour}
	want, got := listUsage(t, ref, ns, q), listUsage(t, c, ns, q)
	if usageLines(got) != usageLines(want) {
		t.Errorf("snapshots\n got %s\nwant %s", usageLines(got), usageLines(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i].Expires != want[i].Expires {
			t.Errorf("%s: expires %d, want %d", got[i].Key.Entity, got[i].Expires, want[i].Expires)
		}
	}
	if _, injected := c.net.take(); injected["UpdateItem"] == 0 {
		t.Error("no lost response was injected")
	}
}

// More sources than one write carries: the snapshot takes one write per
// 16 sources.
func TestUsageManySources(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	var batch []store.UsageIncrement
	for i := range 40 {
		batch = append(batch, usageInc("k", "api", usageT0, fmt.Sprintf("src-%02d", i), "1", 1, map[string]int64{"rpm": 1}))
	}
	c.calls.take()
	addUsage(t, c, ns, batch...)
	expectCalls(t, "40 sources", c.calls.take(), map[string]int{"UpdateItem": 3})
	addUsage(t, c, ns, batch...)
	expectCalls(t, "40 sources again", c.calls.take(), map[string]int{"UpdateItem": 1})
	got := listUsage(t, c, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour})
	if want := "k/api@0 e=40 map[rpm:40]; "; usageLines(got) != want {
		t.Errorf("snapshots %s, want %s", usageLines(got), want)
	}
}

// Retention: the greatest Expires wins, in ms (exp) and in rounded-up
// seconds (ttl); raising it is one extra write, and a redelivered
// increment raises it too (it repairs a raise lost after its increment).
func TestUsageRetention(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	k := store.UsageKey{Entity: "k", Resource: "api", Window: store.Hourly, Start: usageT0}
	at := func(source, seq string, expires int64) store.UsageIncrement {
		in := usageInc("k", "api", usageT0, source, seq, 1, map[string]int64{"rpm": 1000})
		in.Expires = expires
		return in
	}
	check := func(what string, calls map[string]int, wantExp int64) {
		t.Helper()
		expectCalls(t, what, c.calls.take(), calls)
		it := rawUsage(t, tt.admin, ns, k)
		exp, _ := getN(it, attrUsageExpires)
		ttl, _ := getN(it, attrTTL)
		if exp != wantExp || ttl != (wantExp+999)/1000 {
			t.Errorf("%s: exp %d, ttl %d; want %d, %d", what, exp, ttl, wantExp, (wantExp+999)/1000)
		}
	}
	e1 := usageT0 + 10*usageHour + 1 // not a whole second: ttl rounds up
	c.calls.take()
	addUsage(t, c, ns, at("a", "1", e1), at("a", "2", e1))
	check("constant retention", map[string]int{"UpdateItem": 1}, e1)
	addUsage(t, c, ns, at("a", "3", e1-usageHour))
	check("an earlier retention", map[string]int{"UpdateItem": 1}, e1)
	addUsage(t, c, ns, at("a", "4", e1+usageHour), at("a", "5", e1+2*usageHour))
	check("a later retention", map[string]int{"UpdateItem": 2}, e1+2*usageHour)
	addUsage(t, c, ns, at("a", "5", e1+3*usageHour)) // skipped, but its retention counts
	check("a redelivery", map[string]int{"UpdateItem": 2}, e1+3*usageHour)
	addUsage(t, c, ns, at("a", "6", 0))
	check("no retention", map[string]int{"UpdateItem": 1}, e1+3*usageHour)

	snaps := listUsage(t, c, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour, Now: e1 + 3*usageHour - 1})
	if len(snaps) != 1 || snaps[0].Expires != e1+3*usageHour || snaps[0].Events != 6 {
		t.Errorf("snapshot %+v", snaps)
	}
	snaps = listUsage(t, c, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour, Now: e1 + 3*usageHour})
	if len(snaps) != 0 {
		t.Errorf("expired snapshot listed by resource: %+v", snaps)
	}
}

// The item as stored: docs/dynamodb.md 2.1's keys, the GSI2 and GSI4 keys, and the
// attributes docs/dynamodb.md 2.5 lists.
func TestUsageItemLayout(t *testing.T) {
	s := newTable(t)
	ns := "ns-" + randomHex(8)
	odd := "arn:aws:dynamodb:us-east-1:1:table/t/stream/2026#shard 1" // '/', '#' and ' ' are not kept verbatim
	in := usageInc("key-1", "openai/gpt-4o", usageT0, "shardId-0001", "0042", 2, map[string]int64{"rpm": 2000, "tpm": -500})
	in.Expires = usageT0 + 5000
	in2 := in
	in2.Source, in2.Seq, in2.Consumed, in2.Events = odd, "7", nil, 0
	addUsage(t, s, ns, in, in2)
	it := rawUsage(t, s, ns, in.Key)
	strs := map[string]string{
		attrPK:             ns + "/ENTITY#key-1",
		attrSK:             fmt.Sprintf("#USAGE#openai/gpt-4o#hour#%020d", usageT0),
		attrGSI2PK:         ns + "/RESOURCE#openai/gpt-4o",
		attrGSI2SK:         fmt.Sprintf("USAGE#hour#%020d#key-1", usageT0),
		attrGSI4PK:         namespaceIndexKey(ns, it), // one of ns#0 to ns#f: TestNamespaceIndexSpread
		attrGSI4SK:         ns + "/ENTITY#key-1",
		"entity":           "key-1",
		"resource":         "openai/gpt-4o",
		"window":           "hour",
		"seq_shardId-0001": "0042",
	}
	for a, want := range strs {
		if got := getS(it, a); got != want {
			t.Errorf("%s = %q, want %q", a, got, want)
		}
	}
	nums := map[string]int64{"window_start": usageT0, "events": 2, "u_rpm": 2000, "u_tpm": -500,
		"exp": usageT0 + 5000, "ttl": usageT0/1000 + 5}
	for a, want := range nums {
		if got, err := getN(it, a); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", a, got, err, want)
		}
	}
	var hashed []string
	for a := range it {
		if strings.HasPrefix(a, "seq~") {
			hashed = append(hashed, a)
		}
	}
	if len(hashed) != 1 || len(hashed[0]) != 4+32 || getS(it, hashed[0]) != "7" || hashed[0] != usageSeqAttr(odd) {
		t.Errorf("hashed sequence attributes %q (want %q = \"7\")", hashed, usageSeqAttr(odd))
	}
	if want := 6 + 4 + 1 + 2 + 2 + 2; len(it) != want { // keys, identity, events, counters, exp and ttl, sequences
		t.Errorf("%d attributes, want %d: %v", len(it), want, slices.Sorted(maps.Keys(it)))
	}
}

// Paging by entity without a resource reads both windows' snapshots of
// every resource; the other window and expired snapshots are dropped, and
// pages still come out full and in order.
func TestUsageEntityPaging(t *testing.T) {
	s := newTable(t)
	ns := "ns-" + randomHex(8)
	var incs []store.UsageIncrement
	var want []string
	for _, r := range []string{"a", "a.b", "b"} {
		for h := range int64(3) {
			in := usageInc("k", r, usageT0+h*usageHour, "src", "1", 1, map[string]int64{"rpm": h})
			in.Expires = usageT0 + 10*usageHour
			if r == "a.b" && h == 1 {
				in.Expires = usageT0 + usageHour // expired at Now below
			} else {
				want = append(want, fmt.Sprintf("k/%s@%d e=1 map[rpm:%d]; ", r, h, h))
			}
			day := in
			day.Key.Window, day.Key.Start = store.Daily, store.Daily.Start(in.Key.Start)
			incs = append(incs, in, day)
		}
	}
	addUsage(t, s, ns, incs...)
	q := store.UsageQuery{Entity: "k", Window: store.Hourly, From: 0, To: math.MaxInt64, Limit: 3, Now: usageT0 + 2*usageHour}
	var all []store.UsageSnapshot
	for range 10 {
		got := listUsage(t, s, ns, q)
		all = append(all, got...)
		if len(got) < q.Limit {
			break
		}
		q.After = got[len(got)-1].Cursor
	}
	if usageLines(all) != strings.Join(want, "") {
		t.Errorf("paged listing\n got %s\nwant %s", usageLines(all), strings.Join(want, ""))
	}
}

// Paging by resource crosses GSI2 pages and BatchGetItem calls; bucket
// entries of the same GSI2 partition never show up; ranges that reach
// below zero or to the ends of int64 work; an empty range reads nothing.
func TestUsageResourceListing(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	// A bucket-like entry of the resource in GSI2.
	if _, err := tt.admin.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &tt.admin.table, Item: item{
		attrPK: str(ns + "/BUCKET#e00#api#0"), attrSK: str(skState),
		attrGSI2PK: str(resourcePK(ns, "api")), attrGSI2SK: str("BUCKET#e00#0"),
	}}); err != nil {
		t.Fatal(err)
	}
	var incs []store.UsageIncrement
	var want []string
	for h := range int64(3) {
		for e := range 40 {
			id := fmt.Sprintf("e%02d", e)
			incs = append(incs, usageInc(id, "api", usageT0+h*usageHour, "a", "1", 1, map[string]int64{"rpm": h}))
			if h < 2 {
				want = append(want, fmt.Sprintf("%s/api@%d e=1 map[rpm:%d]; ", id, h, h))
			}
		}
		incs = append(incs, usageInc("e00", "chat", usageT0+h*usageHour, "a", "1", 1, nil))
	}
	addUsage(t, c, ns, incs...)

	q := store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + 2*usageHour, Limit: 7}
	var all []store.UsageSnapshot
	c.calls.take()
	pages := 0
	for ; pages < 20; pages++ {
		got := listUsage(t, c, ns, q)
		all = append(all, got...)
		if len(got) < q.Limit {
			break
		}
		q.After = got[len(got)-1].Cursor
	}
	if usageLines(all) != strings.Join(want, "") {
		t.Errorf("paged listing\n got %s\nwant %s", usageLines(all), strings.Join(want, ""))
	}
	calls := c.calls.take()
	if pages != 11 || calls["Query"] != 12 || calls["BatchGetItem"] != 12 || len(calls) != 2 {
		t.Errorf("%d pages, calls %s: want 12 pages of one Query and one BatchGetItem each", pages+1, formatCalls(calls))
	}

	for _, r := range []struct{ from, to int64 }{
		{math.MinInt64, math.MaxInt64}, {-usageHour, math.MaxInt64}, {0, usageT0 + 3*usageHour}, {math.MinInt64, usageT0 + 3*usageHour},
	} {
		byRes := listUsage(t, c, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: r.from, To: r.to})
		byEnt := listUsage(t, c, ns, store.UsageQuery{Entity: "e00", Window: store.Hourly, From: r.from, To: r.to})
		if len(byRes) != 120 || len(byEnt) != 6 {
			t.Errorf("[%d, %d): %d snapshots of api, %d of e00; want 120, 6", r.from, r.to, len(byRes), len(byEnt))
		}
	}
	c.calls.take()
	for _, r := range []struct{ from, to int64 }{{usageT0, usageT0}, {usageT0 + usageHour, usageT0}, {math.MinInt64, 0}} {
		for _, q := range []store.UsageQuery{
			{Resource: "api", Window: store.Hourly, From: r.from, To: r.to},
			{Entity: "e00", Resource: "api", Window: store.Hourly, From: r.from, To: r.to},
		} {
			if got := listUsage(t, c, ns, q); len(got) != 0 {
				t.Errorf("[%d, %d) listed %s", r.from, r.to, usageLines(got))
			}
		}
	}
	if calls := c.calls.take(); calls["Query"] != 2 || len(calls) != 1 {
		t.Errorf("empty ranges: calls %s, want 2 Query (the ranges reaching below zero)", formatCalls(calls))
	}
	// A cursor past the end.
	q = store.UsageQuery{Entity: "e00", Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + 3*usageHour, After: "zzz#1"}
	if got := listUsage(t, c, ns, q); len(got) != 0 {
		t.Errorf("after the last resource: %s", usageLines(got))
	}
}

// Bad input is refused before anything is written.
func TestUsageBadInput(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ns := "ns-" + randomHex(8)
	good := usageInc("k", "api", usageT0, "a", "1", 1, map[string]int64{"rpm": 1})
	for _, bad := range []store.UsageIncrement{
		usageInc("k#x", "api", usageT0, "a", "1", 1, nil),
		usageInc("k", "api#hour", usageT0, "a", "1", 1, nil),
		usageInc("k", "api", usageT0+1, "a", "1", 1, nil),
		usageInc("k", "api", usageT0, "a", "1", 1, map[string]int64{"rpm#x": 1}),
		usageInc("k", "", usageT0, "a", "1", 1, nil),
	} {
		c.calls.take()
		err := c.AddUsage(context.Background(), ns, []store.UsageIncrement{good, bad})
		var ve *model.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("AddUsage(%+v) = %v, want a *model.ValidationError", bad, err)
		}
		expectCalls(t, "a refused batch", c.calls.take(), nil)
	}
	for _, q := range []store.UsageQuery{
		{Entity: "k#x", Window: store.Hourly, From: 0, To: 1},
		{Resource: "a#b", Window: store.Hourly, From: 0, To: 1},
	} {
		if _, err := c.ListUsage(context.Background(), ns, q); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ListUsage(%+v) = %v, want a validation error", q, err)
		}
	}
	expectCalls(t, "refused queries", c.calls.take(), nil)
}

// Many snapshots in one call are written in parallel, each exactly once.
func TestUsageManySnapshots(t *testing.T) {
	s := newTable(t)
	ns := "ns-" + randomHex(8)
	var incs []store.UsageIncrement
	for e := range 50 {
		for i := 1; i <= 2; i++ {
			incs = append(incs, usageInc(fmt.Sprintf("k%02d", e), "api", usageT0, "a", fmt.Sprint(i), 1, map[string]int64{"rpm": 1000}))
		}
	}
	addUsage(t, s, ns, incs...)
	addUsage(t, s, ns, incs...)
	got := listUsage(t, s, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: usageT0, To: usageT0 + usageHour})
	if len(got) != 50 {
		t.Fatalf("%d snapshots, want 50", len(got))
	}
	for _, sn := range got {
		if sn.Events != 2 || !maps.Equal(sn.Consumed, map[string]int64{"rpm": 2000}) {
			t.Errorf("%s", usageLines([]store.UsageSnapshot{sn}))
		}
	}
}

// Purging a namespace deletes its usage snapshots (they carry GSI4 keys).
func TestUsagePurge(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	n := model.Namespace{Name: "usage-" + randomHex(4), ID: randomHex(8), CreatedAt: time.Now()}
	if err := s.CreateNamespace(ctx, n); err != nil {
		t.Fatal(err)
	}
	other := randomHex(8)
	var incs []store.UsageIncrement
	for e := range 3 {
		for h := range int64(4) {
			incs = append(incs, usageInc(fmt.Sprintf("k%d", e), "api", usageT0+h*usageHour, "a", "1", 1, map[string]int64{"rpm": 1}))
		}
	}
	addUsage(t, s, n.ID, incs...)
	addUsage(t, s, other, incs...)
	if err := s.PurgeNamespace(ctx, n.Name, nil); err != nil {
		t.Fatal(err)
	}
	all := store.UsageQuery{Resource: "api", Window: store.Hourly, From: 0, To: math.MaxInt64}
	if got := listUsage(t, s, n.ID, all); len(got) != 0 {
		t.Errorf("after purge: %s", usageLines(got))
	}
	for e := range 3 {
		q := store.UsageQuery{Entity: fmt.Sprintf("k%d", e), Window: store.Hourly, From: 0, To: math.MaxInt64}
		if got := listUsage(t, s, n.ID, q); len(got) != 0 {
			t.Errorf("after purge, by entity: %s", usageLines(got))
		}
	}
	if got := listUsage(t, s, other, all); len(got) != 12 {
		t.Errorf("another namespace lost snapshots: %d left, want 12", len(got))
	}
}

func TestBucketListerConformance(t *testing.T) {
	s := newTable(t)
	storetest.RunBucketLister(t, func(t *testing.T) storetest.ListerStore { return s })
}

// A sharded bucket is listed once, with its shards summed.
func TestListBucketsShardedOnce(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	grants := splitTo(t, s, k, hotParams, hotEpoch, 4)
	bs, err := s.ListBuckets(context.Background(), "ns", "api", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Entity != "hot" || len(bs[0].Record.Limits) != 1 || bs[0].Record.Limits[0].Params.Capacity != hotParams.Capacity ||
		bs[0].Record.Limits[0].State.Tokens != hotParams.Capacity-grants*1000 {
		t.Fatalf("listing %+v", bs)
	}
}
