package tollgate_test

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// Reserve takes what consume names, or, when it names nothing, 1 of every
// reserved limit in effect (the call's WithLimits, else the stored ones)
// and nothing else; it reports a new reservation with its statuses and the
// reservation as stored.
func TestReserveTakesTheReservedLimitsInEffect(t *testing.T) {
	explicit := tollgate.WithLimits(tollgate.ReservedLimit("gpus", 2), tollgate.ReservedLimit("nodes", 5), tollgate.PerMinute("rpm", 10))
	cases := []struct {
		name    string
		consume tollgate.Consume
		opts    []tollgate.AcquireOption
		want    tollgate.Consume
	}{
		{"stored, nil consume", nil, nil, tollgate.Consume{"clusters": 1}},
		{"stored, empty consume", tollgate.Consume{}, nil, tollgate.Consume{"clusters": 1}},
		{"stored, named", tollgate.Consume{"clusters": 1, "rpm": 3}, nil, tollgate.Consume{"clusters": 1, "rpm": 3}},
		{"explicit, nil consume", nil, []tollgate.AcquireOption{explicit}, tollgate.Consume{"gpus": 1, "nodes": 1}},
		{"explicit, named", tollgate.Consume{"gpus": 1, "rpm": 1}, []tollgate.AcquireOption{explicit}, tollgate.Consume{"gpus": 1, "rpm": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			lim, adm, _ := newReservations(t)
			g, err := lim.Reserve(ctx, "team-a", "emr", "j-1", c.consume, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if !g.New || g.Degraded || !maps.Equal(g.Consumed, c.want) {
				t.Errorf("grant New %v, Degraded %v, Consumed %v; want new, not degraded, %v", g.New, g.Degraded, g.Consumed, c.want)
			}
			for name := range c.want {
				statusOf(t, g.Statuses, "team-a", name)
			}
			for _, s := range g.Statuses { // every limit of the request, taken or not
				if s.Capacity-s.Available != c.want[s.Limit] {
					t.Errorf("status of %s: %+v, want %d taken", s.Limit, s, c.want[s.Limit])
				}
			}
			if g.ID != "j-1" || g.Entity != "team-a" || g.Resource != "emr" || g.Holder != "test-host/7" || !g.Created.Equal(tgEpoch) {
				t.Errorf("reservation %+v, want j-1 of team-a/emr held by test-host/7 since %v", g.Reservation, tgEpoch)
			}
			stored, err := adm.Reservation(ctx, "j-1")
			if err != nil || !reflect.DeepEqual(stored, g.Reservation) {
				t.Errorf("Admin.Reservation = %+v, %v; want what Reserve returned, %+v", stored, err, g.Reservation)
			}
		})
	}
}

// Reserve refuses bad input, reserved limits none or full, and an id
// another entity or resource holds; the same id reserved again by its
// holder is the same reservation, debited once.
func TestReserveRefusalsAndRepeats(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newReservations(t)
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))

	_, err := lim.Reserve(ctx, "team-a", "emr", "-bad", nil)
	wantValidation(t, err, "id")
	_, err = lim.Reserve(ctx, "team-a", "emr", "", nil)
	wantValidation(t, err, "id")
	_, err = lim.Reserve(ctx, "team-a", "api", "j-1", nil) // stored: a rate limit only
	wantValidation(t, err, "consume")
	_, err = lim.Reserve(ctx, "team-a", "emr", "j-1", nil, tollgate.WithLimits(tollgate.PerMinute("rpm", 5)))
	wantValidation(t, err, "consume")
	_, err = lim.Reserve(ctx, "team-a", "nothing", "j-1", nil) // no limits at all: refused as an acquire is
	if !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("no limits at all: %v, want ErrInvalid", err)
	}
	if got := reservedIDs(t, adm, "team-a", "", 10); len(got) != 0 {
		t.Fatalf("refused reservations left %v", got)
	}

	first, err := lim.Reserve(ctx, "team-a", "emr", "j-1", nil)
	if err != nil || !first.New {
		t.Fatalf("first Reserve = %+v, %v; want a new reservation", first, err)
	}
	again, err := lim.Reserve(ctx, "team-a", "emr", "j-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.New || len(again.Statuses) != 0 || !reflect.DeepEqual(again.Reservation, first.Reservation) {
		t.Errorf("same id again = %+v; want New false, no statuses, the first's reservation %+v", again, first.Reservation)
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != 2 {
		t.Errorf("%d clusters free after one reservation made twice, want 2", got)
	}
	for _, other := range []struct{ entity, resource string }{{"team-b", "emr"}, {"team-a", "api"}} {
		_, err := lim.Reserve(ctx, other.entity, other.resource, "j-1", tollgate.Consume{"clusters": 1},
			tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("rpm", 100)))
		if !errors.Is(err, tollgate.ErrReservationConflict) {
			t.Errorf("j-1 by %s/%s: %v, want ErrReservationConflict", other.entity, other.resource, err)
		}
	}

	for _, id := range []string{"j-2", "j-3"} {
		if _, err := lim.Reserve(ctx, "team-a", "emr", id, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = lim.Reserve(ctx, "team-a", "emr", "j-4", nil)
	if ex := wantExceeded(t, err); ex.Primary().Limit != "clusters" {
		t.Errorf("full: primary violation %+v, want clusters", ex.Primary())
	}
	if _, err := adm.Reservation(ctx, "j-4"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("Reservation of the refused j-4: %v, want ErrLeaseNotFound", err)
	}
}

// The reserve audit event records the principal of WithAudit, the id and
// what was taken; a repeat of the same reservation writes none.
func TestReserveAuditsThePrincipal(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newReservations(t)
	audit := tollgate.WithAudit(tollgate.WithPrincipal("alice@example.com"))
	for range 2 {
		if _, err := lim.Reserve(ctx, "team-a", "emr", "j-1", nil, audit); err != nil {
			t.Fatal(err)
		}
	}
	var reserves []tollgate.AuditEvent
	for _, ev := range auditOf(t, adm, "team-a") {
		if ev.Action == tollgate.ActionReservationReserve {
			reserves = append(reserves, ev)
		}
	}
	if len(reserves) != 1 {
		t.Fatalf("reserve events %+v, want one", reserves)
	}
	ev := reserves[0]
	if ev.Principal != "alice@example.com" || ev.Resource != "emr" || ev.Details["reservation"] != "j-1" || ev.Details["consumed"] != "clusters=1" {
		t.Errorf("reserve event %+v, want alice's reservation j-1 of emr, clusters=1", ev)
	}
}

// A store that cannot answer in Allow mode gives a degraded grant, which
// reserves nothing, and describes the reservation from the call.
func TestReserveDegraded(t *testing.T) {
	ctx := context.Background()
	lim, _, fs, _ := newFaultPair(t)
	fs.failOn(errConnReset, mGetConfigs, mGetEntity, mConsume, mGetLease)
	g, err := lim.Reserve(ctx, "team-a", "emr", "j-1", nil,
		tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3)), tollgate.WithOnUnavailable(tollgate.Allow))
	if err != nil || !g.Degraded {
		t.Fatalf("Reserve = %+v, %v; want a degraded grant", g, err)
	}
	if g.ID != "j-1" || g.Entity != "team-a" || g.Resource != "emr" || len(g.Statuses) != 0 {
		t.Errorf("degraded grant %+v, want j-1 of team-a/emr without statuses", g)
	}
	if lim.Stats().Degraded != 1 {
		t.Errorf("Stats().Degraded = %d, want 1", lim.Stats().Degraded)
	}
	_, err = lim.Reserve(ctx, "team-a", "emr", "j-2", nil, tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3)))
	if !errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("Block: %v, want ErrUnavailable", err)
	}
}

// The planes do not overlap: a Limiter has the data plane's few methods,
// an Admin satisfies the control plane's interface, and no method but
// Namespace is on both.
func TestPlanesDoNotOverlap(t *testing.T) {
	limT := reflect.TypeFor[*tollgate.Limiter]()
	admT := reflect.TypeFor[*tollgate.Admin]()
	if n := limT.NumMethod(); n > 16 {
		var names []string
		for i := range n {
			names = append(names, limT.Method(i).Name)
		}
		t.Errorf("*Limiter has %d exported methods, want at most 16: %v", n, names)
	}
	if iface := reflect.TypeFor[model.Administrator](); !admT.Implements(iface) {
		t.Errorf("*Admin does not satisfy model.Administrator")
	}
	for i := range limT.NumMethod() {
		name := limT.Method(i).Name
		if _, ok := admT.MethodByName(name); ok && name != "Namespace" {
			t.Errorf("%s is a method of both *Limiter and *Admin", name)
		}
	}
	for _, name := range []string{"Namespace", "Acquire", "Reserve", "Release", "Stats"} {
		if _, ok := limT.MethodByName(name); !ok {
			t.Errorf("*Limiter has no method %s", name)
		}
	}
	if _, ok := admT.MethodByName("Namespace"); !ok {
		t.Error("*Admin has no method Namespace")
	}
}
