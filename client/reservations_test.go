package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
)

func TestReservations(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	must(t, "SetLimits", c.SetLimits(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: []tollgate.Limit{
		tollgate.ReservedLimit("clusters", 2), tollgate.PerMinute("rpm", 100)}}))

	steps := []struct {
		name     string
		entity   string
		id       string
		consume  tollgate.Consume
		opts     []client.AcquireOption
		wantNew  bool
		wantErr  error // matched with errors.Is, or by type for rate limits
		wantRate bool
	}{
		{name: "the reserved limits in effect", entity: "team-a", id: "j-1", wantNew: true},
		{name: "idempotent", entity: "team-a", id: "j-1"},
		{name: "with a rate limit and an expiry", entity: "team-a", id: "j-2", consume: tollgate.Consume{"clusters": 1, "rpm": 1},
			opts: []client.AcquireOption{client.WithLeaseTTL(time.Hour)}, wantNew: true},
		{name: "full", entity: "team-a", id: "j-3", wantRate: true},
		{name: "held by another entity", entity: "team-b", id: "j-1", wantErr: tollgate.ErrReservationConflict},
		{name: "bad id", entity: "team-a", id: "j 3", wantErr: tollgate.ErrInvalid},
	}
	for _, st := range steps {
		r, err := c.Reserve(ctx, st.entity, "emr", st.id, st.consume, st.opts...)
		var rl *tollgate.RateLimitExceeded
		switch {
		case st.wantRate:
			if !errors.As(err, &rl) || rl.Statuses[0].Kind != tollgate.Reserved || !rl.Statuses[0].Exceeded {
				t.Errorf("%s: err %v, want a denial of the reserved limit", st.name, err)
			}
		case st.wantErr != nil:
			if !errors.Is(err, st.wantErr) {
				t.Errorf("%s: err %v, want %v", st.name, err, st.wantErr)
			}
		case err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case r.ID != st.id || r.Entity != st.entity || r.Resource != "emr" || r.New != st.wantNew || !r.Created.Equal(epoch) || r.Holder == "":
			t.Errorf("%s: %+v", st.name, r)
		case st.wantNew && (r.Consumed["clusters"] != 1 || len(r.Statuses) == 0):
			t.Errorf("%s: consumed %v statuses %v", st.name, r.Consumed, r.Statuses)
		}
	}

	got, err := c.Reservation(ctx, "j-2")
	must(t, "Reservation", err)
	if want := epoch.Add(time.Hour); got.Entity != "team-a" || !got.Expires.Equal(want) {
		t.Errorf("Reservation(j-2) = %+v, want team-a's expiring at %v", got, want)
	}
	var pages []string
	for after := ""; ; {
		page, next, err := c.Reservations(ctx, "team-a", "emr", after, 1)
		must(t, "Reservations", err)
		pages = append(pages, fmt.Sprint(len(page), " ", page[0].ID))
		if next == "" {
			break
		}
		after = next
	}
	if fmt.Sprint(pages) != "[1 j-1 1 j-2]" {
		t.Errorf("pages %v", pages)
	}
	if _, _, err := c.Reservations(ctx, "team-a", "", "", 0); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("limit 0: %v", err)
	}

	must(t, "Release", c.Release(ctx, "j-1"))
	if err := c.Release(ctx, "j-1"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("second Release: %v, want ErrLeaseNotFound", err)
	}
	if _, err := c.Reservation(ctx, "j-1"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("Reservation after Release: %v, want ErrLeaseNotFound", err)
	}
	if _, err := c.Reserve(ctx, "team-a", "emr", "j-3", nil); err != nil {
		t.Errorf("the cluster released is free: %v", err)
	}
}

// An id with a slash goes through escaped and comes back whole.
func TestReservationIDWithSlash(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	id := "cluster/j-9"
	_, err := c.Reserve(ctx, "team-a", "emr", id, nil, client.WithLimits(tollgate.ReservedLimit("clusters", 1)))
	must(t, "Reserve", err)
	r, err := c.Reservation(ctx, id)
	must(t, "Reservation", err)
	if r.ID != id {
		t.Errorf("Reservation = %+v", r)
	}
	must(t, "Release", c.Release(ctx, id))
}

func TestPenalize(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 10), tollgate.ConcurrencyLimit("slots", 1))
	must(t, "SetLimits", c.SetLimits(ctx, tollgate.ResourceScope("llm"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}}))

	must(t, "Penalize", c.Penalize(ctx, "k", "llm", epoch.Add(30*time.Second), "vendor 429", []string{"rpm"}))
	_, err := c.AcquireAndCommit(ctx, "k", "llm", tollgate.Consume{"rpm": 1})
	var rl *tollgate.RateLimitExceeded
	if !errors.As(err, &rl) || rl.RetryAfter < 30*time.Second {
		t.Errorf("acquire after Penalize: %v, want a denial for 30s or more", err)
	}
	var ve *tollgate.ValidationError
	if err := c.Penalize(ctx, "k", "llm", epoch.Add(-time.Second), "", []string{"rpm"}); !errors.As(err, &ve) || ve.Field != "until_ms" {
		t.Errorf("Penalize in the past: %v, want invalid until_ms", err)
	}

	le, err := c.Acquire(ctx, "k2", "llm", tollgate.Consume{"slots": 1}, limits)
	must(t, "Acquire", err)
	must(t, "Lease.Penalize", le.Penalize(ctx, epoch.Add(10*time.Second), "vendor 429", []string{"rpm"}))
	must(t, "Commit", le.Commit(ctx))
	_, err = c.AcquireAndCommit(ctx, "k2", "llm", tollgate.Consume{"rpm": 1}, limits)
	if !errors.As(err, &rl) || rl.RetryAfter < 10*time.Second {
		t.Errorf("acquire after Lease.Penalize: %v, want a denial for 10s or more", err)
	}
	if err := le.Penalize(ctx, epoch.Add(time.Second), "", []string{"rpm"}); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Penalize of an ended lease: %v, want ErrLeaseClosed", err)
	}
	ended := client.LeaseHandle(c, le.ID())
	if err := ended.Penalize(ctx, epoch.Add(time.Second), "", []string{"rpm"}); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Penalize of a lease ended through another handle: %v, want ErrLeaseClosed", err)
	}
	gone := client.LeaseHandle(c, strings.Repeat("0", 32))
	if err := gone.Penalize(ctx, epoch.Add(time.Second), "", []string{"rpm"}); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("Penalize of a lease the server does not know: %v, want ErrLeaseNotFound", err)
	}
}

// Leases lists what the server's limiter lists: the open durable leases,
// page by page, not the reservations.
func TestLeases(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.ConcurrencyLimit("slots", 10), tollgate.ReservedLimit("clusters", 10))
	var want []string
	for _, entity := range []string{"team-a", "team-a", "team-b"} {
		le, err := c.Acquire(ctx, entity, "jobs", tollgate.Consume{"slots": 2}, limits)
		must(t, "Acquire", err)
		want = append(want, le.ID())
	}
	if _, err := c.Reserve(ctx, "team-a", "jobs", "j-1", tollgate.Consume{"clusters": 1}, limits); err != nil {
		t.Fatal(err)
	}
	var got []string
	for after := ""; ; {
		page, next, err := c.Leases(ctx, "", "", after, 2)
		must(t, "Leases", err)
		for _, l := range page {
			got = append(got, l.ID)
			if l.Consumed["slots"] != 2 || l.Expires.IsZero() {
				t.Errorf("lease %+v, want slots 2 and an expiry", l)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want the %d leases %v", got, len(want), want)
	}
	page, _, err := c.Leases(ctx, "team-b", "jobs", "", 10)
	if err != nil || len(page) != 1 || page[0].ID != want[2] || page[0].Entity != "team-b" {
		t.Fatalf("team-b/jobs: %+v, %v", page, err)
	}
	if _, _, err := c.Leases(ctx, "", "jobs", "", 10); !errors.Is(err, tollgate.ErrInvalid) {
		t.Fatalf("a resource without its entity: %v, want ErrInvalid", err)
	}
}
