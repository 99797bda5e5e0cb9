package tollgate_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// leaseIDs pages through Leases, page ids at a time.
func leaseIDs(t *testing.T, adm *tollgate.Admin, entity, resource string, page int) []string {
	t.Helper()
	var ids []string
	for after := ""; ; {
		got, next, err := adm.Leases(context.Background(), entity, resource, after, page)
		if err != nil {
			t.Fatalf("Leases(%q, %q, %q, %d): %v", entity, resource, after, page, err)
		}
		if len(got) > page {
			t.Fatalf("page of %d: %d leases", page, len(got))
		}
		for _, l := range got {
			ids = append(ids, l.ID)
		}
		if next == "" {
			return ids
		}
		after = next
	}
}

// Leases lists the durable leases, not reservations nor leases held in the
// process alone, with what each holds, in id order, page by page.
func TestLeasesList(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, adm, clk := newPair(t, st, tollgate.WithHolder("host/7"))
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("inflight", 10),
		tollgate.ReservedLimit("clusters", 10)}}
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, entity := range []string{"key-1", "key-2"} {
		le := mustAcquire(t, lim, entity, "api", tollgate.Consume{"rpm": 2, "inflight": 1})
		if err := le.Adjust(ctx, tollgate.Consume{"rpm": 3}); err != nil {
			t.Fatal(err)
		}
		if err := le.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, le.ID())
		durable := mustAcquire(t, lim, entity, "web", tollgate.Consume{"rpm": 1}, tollgate.WithDurableLease(), tollgate.WithLeaseTTL(time.Minute))
		want = append(want, durable.ID())
		mustAcquire(t, lim, entity, "api", tollgate.Consume{"rpm": 1}) // in this process alone
		mustAcquire(t, lim, entity, "api", tollgate.Consume{"clusters": 1}, tollgate.WithReservation("j-"+entity))
	}
	slices.Sort(want)
	for _, page := range []int{1, 2, 3, 4, 1000} {
		if got := leaseIDs(t, adm, "", "", page); !slices.Equal(got, want) {
			t.Errorf("page %d: %v, want %v", page, got, want)
		}
	}
	if got := leaseIDs(t, adm, "key-1", "", 10); len(got) != 2 {
		t.Errorf("key-1: %v, want its 2 durable leases", got)
	}
	got, _, err := adm.Leases(ctx, "key-2", "api", "", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("key-2/api: %v, %v; want its concurrency lease", got, err)
	}
	info := got[0]
	if info.Entity != "key-2" || info.Resource != "api" || info.Holder != "host/7" || !info.Created.Equal(clk.Now()) ||
		!info.Expires.Equal(clk.Now().Add(tollgate.DefaultLeaseTTL)) {
		t.Errorf("info = %+v", info)
	}
	if want := (tollgate.Consume{"rpm": 5, "inflight": 1}); !maps.Equal(info.Consumed, want) {
		t.Errorf("Consumed = %v, want %v (the synced adjustment included)", info.Consumed, want)
	}
}

func TestLeasesListValidation(t *testing.T) {
	adm, _ := newAdmin(t, memory.New())
	cases := []struct {
		name, entity, resource, after string
		limit                         int
		field                         string
	}{
		{"bad entity", "a b", "", "", 10, "entity"},
		{"resource without entity", "", "api", "", 10, "resource"},
		{"bad resource", "key", "9api", "", 10, "resource"},
		{"bad after", "key", "", "x y", 10, "after"},
		{"zero limit", "key", "", "", 0, "limit"},
		{"limit too large", "key", "", "", 1001, "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := adm.Leases(context.Background(), c.entity, c.resource, c.after, c.limit)
			var ve *tollgate.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("err = %v, want *ValidationError on %s", err, c.field)
			}
		})
	}
}
