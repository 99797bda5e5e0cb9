package dynamodb

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// legacyItem is a bucket item as schema 1 wrote it: a refilling limit as
// its balance and remainder at rf (with the lower bound of its full time,
// and the version), a concurrency limit as its balance, the meter as a
// balance too.
func legacyItem(ns string, k store.BucketKey, rf int64, rpm bucket.Params, tk, rm int64, slots bucket.Params, free int64) item {
	it := item{
		attrPK: str(bucketPK(ns, k, 0)), attrSK: str(skState), attrEntity: str(k.Entity), attrResource: str(k.Resource),
		attrShard: num(0), attrShardCount: num(1), attrRefilled: num(rf), attrVersion: num(3), attrTTL: num(ttlNever),
		attrGSI4PK: str(ns), attrGSI4SK: str(bucketPK(ns, k, 0)),
	}
	add := func(name string, p bucket.Params, fields map[string]int64) {
		it[limitAttr(name, fieldCapacity)] = num(p.Capacity)
		it[limitAttr(name, fieldAmount)] = num(p.Amount)
		it[limitAttr(name, fieldPeriod)] = num(p.Period)
		for f, v := range fields {
			it[limitAttr(name, f)] = num(v)
		}
	}
	add("rpm", rpm, map[string]int64{fieldTokens: tk, fieldRem: rm, fieldFullAt: rf, fieldConsumed: 7_000})
	add("inflight", slots, map[string]int64{fieldTokens: free, fieldConsumed: 0})
	add(pressureLimit, bucket.Params{Capacity: 1_000_000, Amount: 1_000_000, Period: 1_000}, map[string]int64{fieldTokens: 900_000, fieldRem: 0})
	return it
}

// An item written by schema 1 is read as it always was, takes schema 1
// deltas until it is converted, and is converted exactly by the next
// acquire: every limit then holds the full tick of its state, the balance
// is what schema 1 would have had, and the schema 1 attributes are gone.
func TestLegacyItemConverted(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	k := store.BucketKey{Entity: "old", Resource: "api"}
	rpm := bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000} // 100/min
	slots := bucket.Params{Capacity: 5_000}
	const rf = 1_700_000_000_000
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: legacyItem("ns", k, rf, rpm, 40_000, 12_345, slots, 3_000)}); err != nil {
		t.Fatal(err)
	}
	// Read: the balance at rf, refilled as schema 1 refills it.
	if got, want := balanceAt(t, s, "ns", k, "rpm", rf+6_000), bucket.Refill(bucket.State{Tokens: 40_000, Rem: 12_345}, rpm, 6_000).Tokens; got != want {
		t.Fatalf("schema 1 balance at +6 s: %d, want %d", got, want)
	}

	// A delta before the conversion is a schema 1 delta.
	if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: -2_000, Params: rpm}}); err != nil {
		t.Fatal(err)
	}
	it := mustItem(t, s, "ns", k)
	if tk, _ := getN(it, limitAttr("rpm", fieldTokens)); tk != 42_000 || attrN(it, attrVersion) != 4 || attrN(it, limitAttr("rpm", fieldFullAt)) != 0 {
		t.Fatalf("after a schema 1 refund: tk %d, v %d, fa %d; want 42000, 4, 0", tk, attrN(it, attrVersion), attrN(it, limitAttr("rpm", fieldFullAt)))
	}

	// The acquire converts the item, in one write planned from the item
	// the failed guess returned.
	now := int64(rf + 6_000)
	want := bucket.Refill(bucket.State{Tokens: 42_000, Rem: 12_345}, rpm, now-rf)
	req := consumeReq(now, rpm, 1_000, k)
	req.Buckets[0].Limits = append(req.Buckets[0].Limits, store.LimitRequest{Name: "inflight", Params: slots, Check: true, Amount: 1_000})
	if !mustConsume(t, s, "ns", req) {
		t.Fatal("refused")
	}
	if got := req.Buckets[0].Limits[0].Observed; got != want {
		t.Errorf("Observed %+v, want the schema 1 state refilled: %+v", got, want)
	}
	it = mustItem(t, s, "ns", k)
	for _, gone := range []string{limitAttr("rpm", fieldTokens), limitAttr("rpm", fieldRem), limitAttr("rpm", fieldFullAt), attrVersion,
		limitAttr(pressureLimit, fieldTokens), limitAttr(pressureLimit, fieldRem)} {
		if _, ok := it[gone]; ok {
			t.Errorf("%s survived the conversion", gone)
		}
	}
	img, err := itemImage(it)
	if err != nil || img.legacy() {
		t.Fatalf("converted image: legacy %v, err %v", img != nil && img.legacy(), err)
	}
	if got, exp := img.stateAt(&img.limits[img.find("rpm")], now), bucket.ForceConsume(want, 1_000); got != exp {
		t.Errorf("converted rpm at now: %+v, want %+v", got, exp)
	}
	if got := img.stateAt(&img.limits[img.find("inflight")], now).Tokens; got != 2_000 {
		t.Errorf("inflight after the acquire: %d, want 2000", got)
	}
	if tc := attrN(it, limitAttr("rpm", fieldConsumed)); tc != 7_000-2_000+1_000 {
		t.Errorf("consumed counter %d, want 6000: kept across the conversion", tc)
	}
	// And the next acquire is one write from the image.
	if !mustConsume(t, s, "ns", consumeReq(now, rpm, 1_000, k)) {
		t.Fatal("refused")
	}
	if got, exp := balanceAt(t, s, "ns", k, "rpm", now), bucket.ForceConsume(want, 2_000).Tokens; got != exp {
		t.Errorf("balance after two acquires: %d, want %d", got, exp)
	}
}
