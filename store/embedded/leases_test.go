package embedded_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// Lease records reach the file with the buckets they debited, and an
// ending with an audit event is on disk, event and all, when it returns.
func TestLeasesReachTheFile(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	const ns = "0123456789abcdef"
	slots := bucket.Params{Capacity: 2000}
	k := store.BucketKey{Entity: "job", Resource: "emr"}
	acquire := func(s *embedded.Store, id string) *store.LeaseRecord {
		t.Helper()
		req := &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
			{Name: "slots", Params: slots, Check: true, Amount: 1000},
		}}}}
		req.Lease = store.NewLeaseRecord(id, "test", req, t0+60_000)
		if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
			t.Fatalf("Consume(%s) = %v, %v", id, ok, err)
		}
		return req.Lease
	}
	slotsLeft := func(s *embedded.Store) int64 {
		t.Helper()
		recs, err := s.ReadBuckets(ctx, ns, []store.BucketKey{k})
		if err != nil || recs[0] == nil {
			t.Fatalf("ReadBuckets: %v, %v", recs, err)
		}
		return recs[0].Limits[0].State.Tokens
	}

	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a, b := acquire(s, "lease-a"), acquire(s, "lease-b")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ev := model.AuditEvent{ID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Time: time.UnixMilli(t0 + 61_000).UTC(), Action: model.ActionLeaseExpired, Entity: "job", Resource: "emr"}
	err = s.EndLease(ctx, ns, store.LeaseEnding{ID: a.ID, Version: 1, ExpiredBy: t0 + 61_000, Deltas: a.EndDeltas(store.Expire), Event: &ev})
	if err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	// A copy of the file as it is now, without Close (which flushes): what
	// a crash would leave.
	snapshot := path + ".crash"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snapshot, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := open(t, snapshot)
	if _, err := r.GetLease(ctx, ns, a.ID); !errors.Is(err, model.ErrLeaseNotFound) {
		t.Errorf("the ended lease after reopening: %v, want ErrLeaseNotFound", err)
	}
	got, err := r.GetLease(ctx, ns, b.ID)
	if err != nil || got.Expires != b.Expires || len(got.Buckets) != 1 || got.Buckets[0].Limits[0].Amount != 1000 {
		t.Errorf("the open lease after reopening = %+v, %v", got, err)
	}
	if n := slotsLeft(r); n != 1000 {
		t.Errorf("slots after reopening = %d millitokens, want 1000 (b's held, a's given back)", n)
	}
	evs, err := r.ListAudit(ctx, ns, "job", "", 10)
	if err != nil || len(evs) != 1 || evs[0].Action != model.ActionLeaseExpired {
		t.Errorf("audit after reopening = %+v, %v; want the expiry", evs, err)
	}
}

// A tombstone reaches the file, and is still one after reopening: the
// lease it records stays ended, listed nowhere.
func TestTombstonesReachTheFile(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	const ns = "0123456789abcdef"
	k := store.BucketKey{Entity: "job", Resource: "emr"}
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	req := &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
		{Name: "slots", Params: bucket.Params{Capacity: 2000}, Check: true, Amount: 1000},
	}}}}
	req.Lease = store.NewLeaseRecord("lease-a", "test", req, t0+60_000)
	if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	err = s.EndLease(ctx, ns, store.LeaseEnding{ID: "lease-a", Version: 1, Deltas: req.Lease.EndDeltas(store.Rollback),
		As: store.Rollback, At: t0 + 1000, KeepUntil: t0 + 600_000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, path)
	got, err := r.GetLease(ctx, ns, "lease-a")
	if err != nil || !got.Ended() || got.EndedAs != store.Rollback || got.KeepUntil != t0+600_000 {
		t.Errorf("the tombstone after reopening = %+v, %v", got, err)
	}
	if recs, _, err := r.ListLeases(ctx, ns, store.LeaseQuery{Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("ListLeases after reopening = %+v, %v; want none", recs, err)
	}
}
