package events_test

import (
	"context"
	"os"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The recorded events against a Limiter as the Releaser: the reservations
// the terminations and the finished job name are released in the store,
// their clusters and job slots come back, and the one no event names stays.
func TestRecordedEventsReleaseReservations(t *testing.T) {
	ctx := context.Background()
	lim, err := tollgate.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	var _ events.Releaser = lim // what the processor needs, nothing more
	limits := []tollgate.Limit{tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("launches", 10)}
	if err := lim.SetConfig(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: limits}); err != nil {
		t.Fatal(err)
	}
	if err := lim.SetConfig(ctx, tollgate.ResourceScope("batch"), tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("jobs", 1)}}); err != nil {
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
	rs, _, err := lim.Reservations(ctx, "team-a", "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != "j-kept" {
		t.Errorf("reservations left %+v, want j-kept alone", rs)
	}
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
