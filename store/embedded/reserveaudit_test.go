package embedded_test

import (
	"os"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// A grant that carries an audit event (a reservation's) is on disk, debit,
// record and event, when Consume returns, though the flush interval is an
// hour: what a crash right after it would leave holds all three.
func TestReserveEventReachesTheFileAtOnce(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	const ns = "0123456789abcdef"
	k := store.BucketKey{Entity: "team", Resource: "emr"}
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	req := &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
		{Name: "clusters", Params: bucket.Params{Capacity: 2000}, Check: true, Amount: 1000},
	}}}}
	req.Lease = store.NewLeaseRecord("r:j-1", "test", req, 0)
	req.Event = &model.AuditEvent{ID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Time: time.UnixMilli(t0).UTC(), Action: model.ActionReservationReserve,
		Entity: "team", Resource: "emr", Details: map[string]string{"reservation": "j-1"}}
	if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
		t.Fatalf("Consume = %v, %v; want granted", ok, err)
	}
	// A copy of the file as it is now, without Close (which flushes).
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
	if _, err := r.GetLease(ctx, ns, "r:j-1"); err != nil {
		t.Errorf("the reservation's record after reopening: %v", err)
	}
	recs, err := r.ReadBuckets(ctx, ns, []store.BucketKey{k})
	if err != nil || recs[0] == nil || recs[0].Limits[0].State.Tokens != 1000 {
		t.Errorf("the bucket after reopening = %+v, %v; want 1000 millitokens left", recs, err)
	}
	evs, err := r.ListAudit(ctx, ns, "team", "", 10)
	if err != nil || len(evs) != 1 || evs[0].Action != model.ActionReservationReserve {
		t.Errorf("audit after reopening = %+v, %v; want the reserve", evs, err)
	}
}
