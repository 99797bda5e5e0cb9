package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Lease tombstones on DynamoDB (docs/dynamodb.md 4.13, "Tombstones"): what
// the conformance suite cannot see. Where they are, what the listings read,
// and the record an ending copies into one.

// scanCounter sums the items the Queries of a client read (ScannedCount:
// before any filter, which is what DynamoDB charges for).
type scanCounter struct {
	mu      sync.Mutex
	scanned int32
}

func (c *scanCounter) apiOption(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("TollgateTestCountScanned",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if q, ok := out.Result.(*dynamodb.QueryOutput); ok {
				c.mu.Lock()
				c.scanned += q.ScannedCount
				c.mu.Unlock()
			}
			return out, md, err
		}), middleware.After)
}

func (c *scanCounter) take() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.scanned
	c.scanned = 0
	return n
}

// tombEnv is a table, a namespace and a concurrency bucket to lease slots
// of.
type tombEnv struct {
	t   *testing.T
	s   *Store
	ns  string
	k   store.BucketKey
	now int64
}

func newTombEnv(t *testing.T, s *Store) *tombEnv {
	return &tombEnv{t: t, s: s, ns: "tomb-" + randomHex(4), k: store.BucketKey{Entity: "job", Resource: "emr"}, now: instrEpoch.UnixMilli()}
}

// request returns a request for one slot of 1,000, at e.now.
func (e *tombEnv) request() *store.ConsumeRequest {
	return &store.ConsumeRequest{Now: e.now, Buckets: []store.BucketRequest{{Key: e.k, Limits: []store.LimitRequest{
		{Name: "slots", Params: bucket.Params{Capacity: 1_000_000}, Check: true, Amount: 1000},
	}}}}
}

// grant acquires a slot with a lease record of id through s.
func (e *tombEnv) grant(s *Store, id string, reused bool) *store.LeaseRecord {
	e.t.Helper()
	req := e.request()
	req.Lease, req.ReusedID = store.NewLeaseRecord(id, "test", req, e.now+60_000), reused
	if !mustConsume(e.t, s, e.ns, req) {
		e.t.Fatalf("lease %s refused", id)
	}
	return req.Lease
}

// end ends rec through s as a commit at e.now, keeping its tombstone for
// keep ms (0: none).
// end ends rec (keeping its tombstone keep ms; 0: none), passing known as
// the record the ender holds (nil: it never saw it).
func (e *tombEnv) end(s *Store, rec, known *store.LeaseRecord, keep int64) error {
	var until int64
	if keep > 0 {
		until = e.now + keep
	}
	return s.EndLease(context.Background(), e.ns, store.LeaseEnding{ID: rec.ID, Version: rec.Version,
		Deltas: rec.EndDeltas(store.Commit), As: store.Commit, At: e.now, KeepUntil: until, Record: known})
}

func (e *tombEnv) getItem(key item) item {
	e.t.Helper()
	out, err := e.s.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.s.table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Item
}

// The tombstone is its own item, beside the record's key in the lease
// partition, under "~" + id: no GSI3 keys, GSI4 keys, a ttl at KeepUntil
// rounded up to the second; the open record is gone.
func TestTombstoneItem(t *testing.T) {
	e := newTombEnv(t, newTable(t))
	rec := e.grant(e.s, fmt.Sprintf("%032x", 1), false)
	if err := e.end(e.s, rec, rec, 600_001); err != nil {
		t.Fatal(err)
	}
	if it := e.getItem(leaseKey(e.ns, rec.ID)); it != nil {
		t.Errorf("the open record is still there: %v", it)
	}
	it := e.getItem(tombstoneKey(e.ns, rec.ID))
	if it == nil {
		t.Fatal("no tombstone item")
	}
	if pk, want := getS(it, attrPK), schema.LeasePK(e.ns, rec.ID); pk != want {
		t.Errorf("PK = %q, want the record's partition %q", pk, want)
	}
	if getS(it, attrSK) != "~"+rec.ID {
		t.Errorf("SK = %q", getS(it, attrSK))
	}
	if _, ok := it[attrGSI3PK]; ok {
		t.Errorf("the tombstone has GSI3 keys: an entity's listing would read it")
	}
	if getS(it, attrGSI4PK) != namespaceIndexKey(e.ns, it) || getS(it, attrGSI4SK) != getS(it, attrPK) {
		t.Errorf("GSI4 keys %q %q: a purge would not find it", getS(it, attrGSI4PK), getS(it, attrGSI4SK))
	}
	if ttl, _ := getN(it, attrTTL); ttl != (e.now+600_001+999)/1000 {
		t.Errorf("ttl = %d, want KeepUntil in seconds, rounded up: %d", ttl, (e.now+600_001+999)/1000)
	}
	got, err := decodeLease(it)
	if err != nil || got.ID != rec.ID || got.EndedAt != e.now || got.KeepUntil != e.now+600_001 || got.Version != 2 || got.Holder != "test" {
		t.Errorf("decoded = %+v, %v", got, err)
	}
}

// The namespace's listing (the reconciler's) reads no tombstone: its
// queries' ScannedCount is the open records alone, however many
// tombstones their partitions hold; so is the listing after an id
// (BETWEEN it and the mark: the id itself is read and dropped).
func TestListingReadsNoTombstone(t *testing.T) {
	tt := newTestTable(t)
	scans := &scanCounter{}
	s := mustNew(t, localConfig(), tt.admin.Table(), []Option{WithoutStreams()}, atLocal, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, scans.apiOption)
	})
	e := newTombEnv(t, s)
	const open, ended = 5, 40
	var ids []string
	for i := range open + ended {
		rec := e.grant(s, fmt.Sprintf("%032x", i+1), false)
		if i >= open {
			if err := e.end(s, rec, rec, 600_000); err != nil {
				t.Fatal(err)
			}
		} else {
			ids = append(ids, rec.ID)
		}
	}
	ctx := context.Background()
	scans.take()
	for _, q := range []store.LeaseQuery{{Limit: 100}, {Limit: 100, ExpiredBy: e.now + 60_000}} {
		recs, _, err := s.ListLeases(ctx, e.ns, q)
		if err != nil || len(recs) != open {
			t.Fatalf("ListLeases(%+v) = %d records, %v; want %d", q, len(recs), err, open)
		}
		if n := scans.take(); n != open {
			t.Errorf("ListLeases(%+v) read %d items, want the %d open records", q, n, open)
		}
	}
	recs, _, err := s.ListLeases(ctx, e.ns, store.LeaseQuery{Limit: 100, After: ids[0]})
	if err != nil || len(recs) != open-1 || recs[0].ID != ids[1] {
		t.Fatalf("ListLeases after %s = %+v, %v", ids[0], recs, err)
	}
	if n := scans.take(); n != open {
		t.Errorf("ListLeases after an id read %d items, want %d (the rest and the id itself)", n, open)
	}
	recs, _, err = s.ListLeases(ctx, e.ns, store.LeaseQuery{Limit: 100, Entity: e.k.Entity})
	if err != nil || len(recs) != open {
		t.Errorf("ListLeases of the entity = %d records, %v; want %d", len(recs), err, open)
	}
}

// An ending that keeps a tombstone copies the record it deletes. An ender
// that passes no record reads it first (one GetItem); one that passes the
// id's record of another time (the same version, another body: an id
// reused after its tombstone was gone) has it refused by the Delete's
// condition, and makes the tombstone again from the record the failure
// returns.
func TestTombstoneCopiesTheRecordEnded(t *testing.T) {
	tt := newTestTable(t)
	a, b := tt.client(t, 5*time.Second), tt.client(t, 5*time.Second)
	e := newTombEnv(t, tt.admin)
	id := fmt.Sprintf("%032x", 7)

	first := e.grant(a.Store, id, true)
	b.calls.take()
	if err := e.end(b.Store, first, nil, 1000); err != nil { // b never saw it
		t.Fatal(err)
	}
	expectCalls(t, "an ending of a record never seen", b.calls.take(), map[string]int{"GetItem": 1, "TransactWriteItems": 1})

	e.now += 2000 // past the tombstone's KeepUntil: the id is free
	second := e.grant(b.Store, id, true)
	if second.Created == first.Created {
		t.Fatal("the test needs records of the id that differ")
	}
	a.calls.take()
	if err := e.end(a.Store, second, first, 600_000); err != nil { // a's copy is the first record's
		t.Fatal(err)
	}
	expectCalls(t, "an ending from a stale copy", a.calls.take(), map[string]int{"TransactWriteItems": 2})
	got, err := tt.admin.GetLease(context.Background(), e.ns, id)
	if err != nil || !got.Ended() || got.Created != second.Created || got.KeepUntil != e.now+600_000 {
		t.Errorf("tombstone = %+v, %v; want the second record's", got, err)
	}
	if bal := balanceAt(t, tt.admin, e.ns, e.k, "slots", e.now); bal != 1_000_000 {
		t.Errorf("slots = %d, want every one back", bal)
	}
}

// A change or an ending of a lease that ended and left its tombstone is a
// conflict, told by one read of the tombstone's key after the write's
// condition failed; without one, the lease is not found.
func TestWritesOfAnEndedLease(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	e := newTombEnv(t, tt.admin)
	ctx := context.Background()
	kept := e.grant(c.Store, fmt.Sprintf("%032x", 1), false)
	gone := e.grant(c.Store, fmt.Sprintf("%032x", 2), false)
	if err := e.end(c.Store, kept, kept, 600_000); err != nil {
		t.Fatal(err)
	}
	if err := e.end(c.Store, gone, gone, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rec  *store.LeaseRecord
		want error
	}{{kept, model.ErrLeaseConflict}, {gone, model.ErrLeaseNotFound}} {
		upd := tc.rec.Clone()
		upd.Version++
		c.calls.take()
		if err := c.UpdateLease(ctx, e.ns, upd); !errors.Is(err, tc.want) {
			t.Errorf("UpdateLease of %s: %v, want %v", tc.rec.ID, err, tc.want)
		}
		expectCalls(t, "a refused update", c.calls.take(), map[string]int{"PutItem": 1, "GetItem": 1})
		for _, keep := range []int64{0, 600_000} {
			if err := e.end(c.Store, tc.rec, tc.rec, keep); !errors.Is(err, tc.want) {
				t.Errorf("EndLease of %s (keep %d): %v, want %v", tc.rec.ID, keep, err, tc.want)
			}
		}
	}
	if bal := balanceAt(t, tt.admin, e.ns, e.k, "slots", e.now); bal != 1_000_000 {
		t.Errorf("slots = %d, want each given back once", bal)
	}
}

// A lease id is checked where the store receives it: one beginning with
// the tombstone mark would name a tombstone's key as a record's.
func TestLeaseIDChecked(t *testing.T) {
	e := newTombEnv(t, newTable(t))
	ctx := context.Background()
	bad := "~" + fmt.Sprintf("%032x", 1)
	req := e.request()
	req.Lease = store.NewLeaseRecord(bad, "test", req, 0)
	if ok, err := e.s.Consume(ctx, e.ns, req); ok || !errors.Is(err, model.ErrInvalid) {
		t.Errorf("Consume with lease id %q = %v, %v; want a validation error", bad, ok, err)
	}
	if _, err := e.s.GetLease(ctx, e.ns, bad); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("GetLease(%q): %v", bad, err)
	}
	if err := e.s.UpdateLease(ctx, e.ns, store.LeaseRecord{ID: bad, Version: 2}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("UpdateLease(%q): %v", bad, err)
	}
	if err := e.s.EndLease(ctx, e.ns, store.LeaseEnding{ID: bad, Version: 1}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("EndLease(%q): %v", bad, err)
	}
}

// Enders race to end the same leases, keeping tombstones: the creator
// (which remembers the records) and two processes that never saw them.
// Each lease ends once, its slot comes back once, and every loser is told
// of a conflict (the tombstone), not of a missing lease.
func TestTombstoneEndersRace(t *testing.T) {
	tt := newTestTable(t)
	e := newTombEnv(t, tt.admin)
	cold := func() *Store { return mustNew(t, localConfig(), tt.admin.Table(), []Option{WithoutStreams()}, atLocal) }
	enders := []*Store{tt.admin, cold(), cold()}
	const leases = 20
	recs := make([]*store.LeaseRecord, leases)
	for i := range recs {
		recs[i] = e.grant(tt.admin, fmt.Sprintf("%032x", i+1), false)
	}
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range enders {
		for range 2 {
			wg.Go(func() {
				for _, rec := range recs {
					err := e.end(s, rec, rec, 600_000)
					mu.Lock()
					switch {
					case err == nil:
						won[rec.ID]++
					case !errors.Is(err, model.ErrLeaseConflict):
						t.Errorf("a losing ender of %s: %v, want ErrLeaseConflict", rec.ID, err)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, rec := range recs {
		if won[rec.ID] != 1 {
			t.Errorf("lease %s ended %d times", rec.ID, won[rec.ID])
		}
	}
	if bal := balanceAt(t, tt.admin, e.ns, e.k, "slots", e.now); bal != 1_000_000 {
		t.Errorf("slots = %d, want each given back once", bal)
	}
}
