package stream

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// testImage is an item image: strings and numbers by name.
type testImage map[string]string // numbers are marked by a leading NUL

func (m testImage) S(name string) string {
	if v := m[name]; len(v) > 0 && v[0] != 0 {
		return v
	}
	return ""
}

func (m testImage) N(name string) string {
	if v := m[name]; len(v) > 0 && v[0] == 0 {
		return v[1:]
	}
	return ""
}

func (m testImage) Names() []string { return slices.Collect(maps.Keys(m)) }

// imageOfItem is a stored item as its stream record's image shows it.
func imageOfItem(it schema.Item) testImage {
	img := testImage{}
	for name, v := range it {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			img[name] = v.Value
		case *types.AttributeValueMemberN:
			img[name] = "\x00" + v.Value
		}
	}
	return img
}

// bucketImage is shard `shard` of n of bucket k in namespace "ns", holding
// rpm at p with the given balance and consumed counter, after ev acquires,
// refilled at rf, with a write-pressure meter of wps writes a second.
func bucketImage(k store.BucketKey, shard, n int, p bucket.Params, tokens, consumed, ev, rf int64, wps int64) testImage {
	num := func(v int64) string { return "\x00" + strconv.FormatInt(v, 10) }
	img := testImage{
		schema.AttrPK: schema.BucketPK("ns", k, shard), schema.AttrSK: schema.SKState, schema.AttrEntity: k.Entity, schema.AttrResource: k.Resource,
		schema.AttrShard: num(int64(shard)), schema.AttrShardCount: num(int64(n)), schema.AttrRefilled: num(rf), schema.AttrEvents: num(ev),
		schema.LimitAttr("rpm", schema.FieldCapacity): num(p.Capacity), schema.LimitAttr("rpm", schema.FieldAmount): num(p.Amount),
		schema.LimitAttr("rpm", schema.FieldPeriod): num(p.Period), schema.LimitAttr("rpm", schema.FieldTokens): num(tokens),
		schema.LimitAttr("rpm", schema.FieldRem): num(0), schema.LimitAttr("rpm", schema.FieldConsumed): num(consumed),
	}
	if wps > 0 {
		m := wps * schema.WriteCost
		img[schema.LimitAttr(schema.PressureLimit, schema.FieldCapacity)], img[schema.LimitAttr(schema.PressureLimit, schema.FieldAmount)] = num(m), num(m)
		img[schema.LimitAttr(schema.PressureLimit, schema.FieldPeriod)], img[schema.LimitAttr(schema.PressureLimit, schema.FieldTokens)] = num(1_000), num(0)
		img[schema.LimitAttr(schema.PressureLimit, schema.FieldRem)] = num(0)
	}
	return img
}

// writer produces the stream records of one bucket item taking acquires
// of `debit` millitokens each.
type writer struct {
	k        store.BucketKey
	shard, n int
	p        bucket.Params
	wps      int64
	debit    int64
	tokens   int64
	consumed int64
	ev       int64
	rf       int64
	last     testImage
	writeSeq *int
}

func newWriter(k store.BucketKey, p bucket.Params, wps, debit int64, seq *int) *writer {
	return &writer{k: k, n: 1, p: p, wps: wps, debit: debit, tokens: p.Capacity, rf: hotEpoch, writeSeq: seq}
}

// write is the record of one acquire at `at` (Unix ms).
func (w *writer) write(at int64) Record {
	w.tokens -= w.debit
	w.consumed += w.debit
	w.ev++
	*w.writeSeq++
	img := bucketImage(w.k, w.shard, w.n, w.p, w.tokens, w.consumed, w.ev, w.rf, w.wps)
	r := Record{Seq: strconv.Itoa(*w.writeSeq), Time: time.UnixMilli(at).Truncate(time.Second), Old: w.last, New: img}
	if w.last == nil {
		r.Old = nil
	}
	w.last = img
	return r
}

// Detection is stateful across batches: a bucket whose shard 0 takes
// writes at 85% of its write-pressure limit, handed over in batches of a
// few records as a reader that keeps up gets them, is split once its
// window shows it; one at 70% never is; an item that goes quiet is
// forgotten.
func TestUpkeepPlanAcrossBatches(t *testing.T) {
	s := mustNew(t, localConfig(), "unused", nil) // plan makes no call
	u := NewUpkeep(s)
	heat := NewHeat()
	seq := 0
	const wps = 100 // the meter: 100 writes a second
	hot := newWriter(store.BucketKey{Entity: "hot", Resource: "api"}, hotParams, wps, 1, &seq)
	warm := newWriter(store.BucketKey{Entity: "warm", Resource: "api"}, hotParams, wps, 1, &seq)
	start := int64(hotEpoch)
	var splitAt int64 = -1
	// 85 writes a second of hot and 70 of warm, 3 records a batch.
	var batch []Record
	for i := 0; i < 85*8; i++ {
		at := start + int64(i)*1000/85
		batch = append(batch, hot.write(at))
		if i%85 < 70 {
			batch = append(batch, warm.write(start+int64(i%85)*1000/70+int64(i/85)*1000))
		}
		if len(batch) < 3 {
			continue
		}
		latest := heat.noteAll(batch)
		batch = nil
		splits := u.plan(heat, latest)
		for _, w := range splits {
			if w.key != hot.k {
				t.Fatalf("split %v at %d ms, at 70%% of its write-pressure limit", w.key, at-start)
			}
			if splitAt < 0 {
				splitAt = at - start
			}
		}
	}
	// Decided once 80 writes have landed in the first second (at 941 ms),
	// across some 25 batches: never from one batch of 3 records.
	if splitAt < 900 || splitAt >= 1_000 {
		t.Errorf("hot bucket split decided at %d ms of 85%% pressure, want at its 80th write of the first second", splitAt)
	}
	if r := heat.rate(schema.BucketPK("ns", warm.k, 0)); r < 55 || r > 70 {
		t.Errorf("warm's rate %.1f writes/s, want about 70 (never above)", r)
	}

	// Quiet for longer than the window: forgotten, and its rate is zero.
	other := newWriter(store.BucketKey{Entity: "other", Resource: "api"}, hotParams, wps, 1, &seq)
	heat.noteAll([]Record{other.write(start + 20_000)})
	if len(heat.items) != 1 {
		t.Errorf("heat remembers %d items after 12 idle seconds, want only the one just written", len(heat.items))
	}
	if r := heat.rate(schema.BucketPK("ns", hot.k, 0)); r != 0 {
		t.Errorf("forgotten item's rate: %v", r)
	}
}

// The rate: writes over the window's seconds since the item was first
// seen, the newest second counted whole.
func TestHeatRate(t *testing.T) {
	h := NewHeat()
	pk := "ns/BUCKET#a#api#0"
	base := int64(hotEpoch)
	for i := range 11 {
		h.note(pk, base+int64(i)*90)
	}
	if r := h.rate(pk); r != 11 {
		t.Errorf("one second: %v writes/s, want 11", r)
	}
	h.note(pk, base+2_500)
	if r := h.rate(pk); r != 4 {
		t.Errorf("12 writes over 3 seconds: %.2f writes/s, want 4", r)
	}
	h.note(pk, base+9_000) // the window is now seconds 5..9
	if r := h.rate(pk); r != 0.2 {
		t.Errorf("one write in the window of 5 seconds: %.2f writes/s, want 0.2", r)
	}
}

// The tumbling-window state carries a heat from invocation to invocation:
// rates survive the round trip; what cannot be decoded is dropped.
func TestHeatState(t *testing.T) {
	h := NewHeat()
	base := int64(hotEpoch)
	for i := range 40 {
		h.note("ns/BUCKET#a#api#0", base+int64(i)*100)
		h.note("ns/BUCKET#b#api.v2/x#3", base+int64(i)*50)
	}
	st := h.State()
	back, err := HeatFromState(st)
	if err != nil {
		t.Fatal(err)
	}
	for pk := range h.items {
		if a, b := h.rate(pk), back.rate(pk); a != b || a == 0 {
			t.Errorf("%s: rate %v before the round trip, %v after", pk, a, b)
		}
	}
	if back.newest != h.newest {
		t.Errorf("newest %d after the round trip, want %d", back.newest, h.newest)
	}
	if fresh, err := HeatFromState(nil); err != nil || len(fresh.items) != 0 {
		t.Errorf("empty state: %v, %v", fresh, err)
	}
	st["ns/BUCKET#c#api#0"] = "12;x,1"
	if got, err := HeatFromState(st); err == nil || len(got.items) != 2 {
		t.Errorf("a damaged entry: %d items, %v; want the 2 others and an error", len(got.items), err)
	}
	if got, err := HeatFromState(map[string]string{heatStateKey: "0 1"}); err == nil || len(got.items) != 0 {
		t.Errorf("another version: %d items, %v; want none and an error", len(got.items), err)
	}
}

// Tend against DynamoDB Local, fed records in small batches: it splits a
// bucket at 90% of its own write-pressure limit (the writers' setting, not
// the upkeep store's), keeps the meter's limit on every shard, and leaves
// a drained item and a quiet one alone (a stored full tick needs no
// proactive refill).
func TestUpkeepTend(t *testing.T) {
	writers := newTable(t, dynamodb.WithWritePressureLimit(20))
	ctx := context.Background()
	hot := store.BucketKey{Entity: "hot", Resource: "api"}
	drained := store.BucketKey{Entity: "drained", Resource: "api"}
	quiet := store.BucketKey{Entity: "quiet", Resource: "api"}
	small := bucket.Params{Capacity: 10_000, Amount: 1_000, Period: 1_000} // 10 tokens, 1 a second
	for _, c := range []struct {
		k    store.BucketKey
		p    bucket.Params
		acqs int
	}{{hot, hotParams, 1}, {drained, small, 10}, {quiet, hotParams, 1}} {
		for range c.acqs {
			if !mustConsume(t, writers, "ns", consumeReq(hotEpoch, c.p, 1_000, c.k)) {
				t.Fatal("refused")
			}
		}
	}
	// The upkeep's own store shards nothing itself (another setting).
	s := mustNew(t, localConfig(), writers.Table(), []dynamodb.Option{dynamodb.WithWritePressureLimit(0)}, atLocal)
	clk := clock.NewFake(time.UnixMilli(hotEpoch + 60_000))
	u := NewUpkeep(s, WithUpkeepClock(clk))
	heat := NewHeat()
	image := func(k store.BucketKey) testImage { return imageOfItem(mustItem(t, s, "ns", k)) }
	hotImg, drainedImg, quietImg := image(hot), image(drained), image(quiet)
	// 18 writes a second of hot (90% of 20) for 3 seconds, then the quiet
	// item (1 token of 1,000 taken) and the drained one (10 acquires of 1
	// token, none left), in batches of 2 records.
	var recs []Record
	for i := range 54 {
		at := hotEpoch + int64(i)*1000/18
		recs = append(recs, Record{Seq: strconv.Itoa(1 + i), Time: time.UnixMilli(at).Truncate(time.Second), New: hotImg})
	}
	last := time.UnixMilli(hotEpoch + 2_999).Truncate(time.Second)
	recs = append(recs, Record{Seq: "55", Time: last, New: quietImg}, Record{Seq: "56", Time: last, New: drainedImg})
	var total Tended
	for i := 0; i < len(recs); i += 2 {
		res, err := u.Tend(ctx, heat, recs[i:i+2])
		if err != nil {
			t.Fatal(err)
		}
		total.Split += res.Split
	}
	if total.Split != 1 {
		t.Errorf("Tend split %d buckets; want the hot one split", total.Split)
	}
	its := shardItems(t, s, "ns", hot)
	if len(its) != 2 {
		t.Fatalf("hot bucket has %d shards, want 2", len(its))
	}
	for i, it := range its {
		if ra, _ := schema.GetN(it, schema.LimitAttr(schema.PressureLimit, schema.FieldAmount)); ra != 20*schema.WriteCost {
			t.Errorf("shard %d's meter refills %d a second, want the writers' %d", i, ra, 20*schema.WriteCost)
		}
	}
	for _, k := range []store.BucketKey{drained, quiet} {
		if got := imageOfItem(mustItem(t, s, "ns", k)); !maps.Equal(got, image(k)) || len(shardItems(t, s, "ns", k)) != 1 {
			t.Errorf("%s written by the upkeep", k.Entity)
		}
	}
}
