package events_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The recorded events against a Limiter as the Releaser: the reservations
// the terminations and the finished job name are released in the store,
// their clusters and job slots come back, and the one no event names stays.
func TestRecordedEventsReleaseReservations(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := tollgate.NewAdmin(st)
	if err != nil {
		t.Fatal(err)
	}
	var _ events.Releaser = lim // what the processor needs, nothing more
	limits := []tollgate.Limit{tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("launches", 10)}
	if err := adm.SetLimits(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: limits}); err != nil {
		t.Fatal(err)
	}
	if err := adm.SetLimits(ctx, tollgate.ResourceScope("batch"), tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("jobs", 1)}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		resource, id string
		consume      tollgate.Consume
	}{
		{"emr", "j-2AXXXXXXGAPLF", tollgate.Consume{"clusters": 1, "launches": 1}},
		{"emr", "j-3BYYYYYYQ7R2M", tollgate.Consume{"clusters": 1, "launches": 1}},
		{"emr", "j-kept", tollgate.Consume{"clusters": 1, "launches": 1}},
		{"batch", "4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f", tollgate.Consume{"jobs": 1}},
	} {
		if _, err := lim.Acquire(ctx, "team-a", r.resource, r.consume, tollgate.WithReservation(r.id)); err != nil {
			t.Fatalf("reserve %s: %v", r.id, err)
		}
	}
	f, err := os.Open("testdata/emr-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := events.NewProcessor(loadRules(t), lim, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx, f); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// As with the fake releaser: the second termination of a cluster and
	// the cluster never reserved are not found.
	if want := (events.Stats{Released: 3, NotFound: 2, Unmatched: 3, Malformed: 2}); p.Stats() != want {
		t.Errorf("Stats = %+v, want %+v", p.Stats(), want)
	}
	rs, _, err := adm.Reservations(ctx, "team-a", "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != "j-kept" {
		t.Errorf("reservations left %+v, want j-kept alone", rs)
	}
	wantReleaseEvents(t, adm)
	want := map[string]int64{"clusters": 2, "launches": 7, "jobs": 1} // launches are spent, not given back
	for _, resource := range []string{"emr", "batch"} {
		sts, err := lim.Available(ctx, "team-a", resource)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sts {
			if s.Available != want[s.Limit] {
				t.Errorf("%s %s: %d available, want %d", resource, s.Limit, s.Available, want[s.Limit])
			}
		}
	}
}

// wantReleaseEvents checks the audit log of the releases: one
// reservation.release event per reservation released, made on an event
// (how), with the rule that matched and the event's source, detail-type
// and id.
func wantReleaseEvents(t *testing.T, adm *tollgate.Admin) {
	t.Helper()
	evs, err := adm.AuditEvents(t.Context(), "team-a", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, ev := range evs {
		if ev.Action == model.ActionReservationRelease {
			got[ev.Details["reservation"]] = ev.Details
		}
	}
	if len(got) != 3 {
		t.Errorf("release events of %v, want the 3 reservations released", slices.Sorted(maps.Keys(got)))
	}
	want := map[string]string{"how": "event", "rule": "emr-terminated", "source": "aws.emr",
		"detail_type": "EMR Cluster State Change", "event_id": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}
	if d := got["j-3BYYYYYYQ7R2M"]; !maps.Equal(d, mergeMap(want, "reservation", "j-3BYYYYYYQ7R2M")) {
		t.Errorf("j-3BYYYYYYQ7R2M's release details = %v, want %v", d, want)
	}
	if d := got["4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f"]; d["rule"] != "batch-done" || d["event_id"] != "5f4e3d2c-1b0a-4987-b6a5-c4d3e2f1a0b9" {
		t.Errorf("the batch job's release details = %v, want rule batch-done and its event", d)
	}
}

// mergeMap returns a copy of m with k set to v.
func mergeMap(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}
