package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// clusters is the stored configuration of the reservation tests: at most 3
// EMR clusters reserved at once, and 100 requests a minute.
var clusters = tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("rpm", 100)}}

// newReservations returns a limiter and an admin (newPair) over a memory
// store with clusters stored for resource "emr".
func newReservations(t *testing.T) (*tollgate.Limiter, *tollgate.Admin, *memory.Store) {
	t.Helper()
	st := memory.New()
	lim, adm, _ := newPair(t, st, tollgate.WithHolder("test-host/7"))
	if err := adm.SetLimits(context.Background(), tollgate.ResourceScope("emr"), clusters); err != nil {
		t.Fatal(err)
	}
	return lim, adm, st
}

// reserve reserves id for entity's "emr" with one cluster and one request.
func reserve(lim *tollgate.Limiter, entity, id string, opts ...tollgate.AcquireOption) (*tollgate.Lease, error) {
	return lim.Acquire(context.Background(), entity, "emr", tollgate.Consume{"clusters": 1, "rpm": 1},
		append([]tollgate.AcquireOption{tollgate.WithReservation(id)}, opts...)...)
}

// reservedIDs lists every reservation of entity, page by page.
func reservedIDs(t *testing.T, adm *tollgate.Admin, entity, resource string, page int) []string {
	t.Helper()
	var ids []string
	after := ""
	for {
		rs, next, err := adm.Reservations(context.Background(), entity, resource, after, page)
		if err != nil {
			t.Fatalf("Reservations(%s, %s, %q, %d): %v", entity, resource, after, page, err)
		}
		if len(rs) > page {
			t.Fatalf("Reservations returned %d, limit %d", len(rs), page)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if next == "" {
			return ids
		}
		after = next
	}
}

// A capacity of 3, reserved, released and reserved again, step by step:
// what each step answers, what stays reserved, and what is left.
func TestReservationLifecycle(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newReservations(t)
	steps := []struct {
		name    string
		entity  string // default team-a
		id      string
		release bool
		want    error    // what the step's error matches; nil: none
		held    []string // team-a's reservations after the step
		free    int64    // clusters available to team-a after the step
		rpm     int64    // rpm available to team-a after the step
	}{
		{name: "reserve a", id: "j-a", held: []string{"j-a"}, free: 2, rpm: 99},
		{name: "reserve b", id: "j-b", held: []string{"j-a", "j-b"}, free: 1, rpm: 98},
		{name: "reserve c", id: "j-c", held: []string{"j-a", "j-b", "j-c"}, free: 0, rpm: 97},
		{name: "d over capacity", id: "j-d", want: tollgate.ErrRateLimited, held: []string{"j-a", "j-b", "j-c"}, free: 0, rpm: 97},
		{name: "a again: the same reservation, nothing debited", id: "j-a", held: []string{"j-a", "j-b", "j-c"}, free: 0, rpm: 97},
		{name: "a by another entity", entity: "team-b", id: "j-a", want: tollgate.ErrReservationConflict, held: []string{"j-a", "j-b", "j-c"}, free: 0, rpm: 97},
		{name: "release b: its cluster back, its request kept", id: "j-b", release: true, held: []string{"j-a", "j-c"}, free: 1, rpm: 97},
		{name: "d now fits", id: "j-d", held: []string{"j-a", "j-c", "j-d"}, free: 0, rpm: 96},
		{name: "release b again", id: "j-b", release: true, want: tollgate.ErrLeaseNotFound, held: []string{"j-a", "j-c", "j-d"}, free: 0, rpm: 96},
		{name: "release an id never reserved", id: "j-zzz", release: true, want: tollgate.ErrLeaseNotFound, held: []string{"j-a", "j-c", "j-d"}, free: 0, rpm: 96},
	}
	for _, s := range steps {
		entity := s.entity
		if entity == "" {
			entity = "team-a"
		}
		var err error
		if s.release {
			err = lim.Release(ctx, s.id)
		} else {
			var le *tollgate.Lease
			if le, err = reserve(lim, entity, s.id); err == nil && le.ID() != "r:"+s.id {
				t.Errorf("%s: lease ID %q, want %q", s.name, le.ID(), "r:"+s.id)
			}
		}
		switch {
		case s.want == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.want != nil && !errors.Is(err, s.want):
			t.Fatalf("%s: error %v, want one matching %v", s.name, err, s.want)
		}
		if got := reservedIDs(t, adm, "team-a", "emr", 10); !slices.Equal(got, s.held) {
			t.Errorf("%s: reserved %v, want %v", s.name, got, s.held)
		}
		if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != s.free {
			t.Errorf("%s: %d clusters free, want %d", s.name, got, s.free)
		}
		if got := availableOf(t, lim, "team-a", "emr", "rpm"); got != s.rpm {
			t.Errorf("%s: %d rpm available, want %d", s.name, got, s.rpm)
		}
	}
	// team-b reserved nothing: its conflict debited nothing.
	if got := availableOf(t, lim, "team-b", "emr", "rpm"); got != 100 {
		t.Errorf("team-b's rpm after its conflict: %d, want 100", got)
	}
}

// A denial names the reserved limit as such.
func TestReservationDenialStatus(t *testing.T) {
	lim, _, _ := newReservations(t)
	for _, id := range []string{"a", "b", "c"} {
		le, err := reserve(lim, "team-a", id)
		if err != nil {
			t.Fatal(err)
		}
		if s := statusOf(t, le.Statuses(), "team-a", "clusters"); s.Kind != tollgate.Reserved {
			t.Errorf("granted status kind %v, want reserved", s.Kind)
		}
	}
	_, err := reserve(lim, "team-a", "d")
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) {
		t.Fatalf("reserve d: %v, want *RateLimitExceeded", err)
	}
	if p := ex.Primary(); p.Limit != "clusters" || p.Kind != tollgate.Reserved || p.Available != 0 || p.Capacity != 3 {
		t.Errorf("primary violation %+v, want clusters, reserved, 0 of 3", p)
	}
}

// The same id reserved twice by its holder is one reservation, whose lease
// can end it.
func TestReservationIdempotentLease(t *testing.T) {
	ctx := context.Background()
	lim, _, _ := newReservations(t)
	first, err := reserve(lim, "team-a", "j-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := reserve(lim, "team-a", "j-1")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID() != first.ID() || again.Entity() != "team-a" || again.Resource() != "emr" {
		t.Errorf("second reservation: ID %q for %s/%s, want %q for team-a/emr", again.ID(), again.Entity(), again.Resource(), first.ID())
	}
	if again.Statuses() != nil {
		t.Errorf("an existing reservation reports statuses %+v: this call saw no grant", again.Statuses())
	}
	if err := again.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("first handle's Commit after the second's: %v, want ErrLeaseNotFound", err)
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != 3 {
		t.Errorf("%d clusters free, want 3", got)
	}
}

// What a reservation must and must not name, refused before anything is
// written.
func TestReservationValidation(t *testing.T) {
	explicit := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("rpm", 100))
	cases := []struct {
		name    string
		consume tollgate.Consume
		opts    []tollgate.AcquireOption
		field   string
		reason  string
	}{
		{"reserved limit without a reservation", tollgate.Consume{"clusters": 1}, nil,
			"consume.clusters", `limit "clusters" is reserved: name the resource id with WithReservation`},
		{"reserved limit at 0 without a reservation", tollgate.Consume{"clusters": 0, "rpm": 1}, nil,
			"consume.clusters", "is reserved"},
		{"explicit reserved limit without a reservation", tollgate.Consume{"clusters": 1}, []tollgate.AcquireOption{explicit},
			"consume.clusters", "is reserved"},
		{"two tokens", tollgate.Consume{"clusters": 2}, []tollgate.AcquireOption{tollgate.WithReservation("j-1")},
			"consume.clusters", `exactly 1 token of reserved limit "clusters"`},
		{"no token", tollgate.Consume{"clusters": 0}, []tollgate.AcquireOption{tollgate.WithReservation("j-1")},
			"consume.clusters", "exactly 1 token"},
		{"explicit, two tokens", tollgate.Consume{"clusters": 2}, []tollgate.AcquireOption{explicit, tollgate.WithReservation("j-1")},
			"consume.clusters", "exactly 1 token"},
		{"no reserved limit named", tollgate.Consume{"rpm": 1}, []tollgate.AcquireOption{tollgate.WithReservation("j-1")},
			"consume", "a reservation takes a token of a reserved limit"},
		{"bad id", tollgate.Consume{"clusters": 1}, []tollgate.AcquireOption{tollgate.WithReservation("-j")},
			"reservation_id", "must start with a letter or digit"},
		{"id too long", tollgate.Consume{"clusters": 1}, []tollgate.AcquireOption{tollgate.WithReservation(string(make([]byte, 257)))},
			"reservation_id", "longer than 256 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lim, _, st := newReservations(t)
			_, err := lim.Acquire(context.Background(), "team-a", "emr", c.consume, c.opts...)
			wantInvalidReason(t, err, c.field, c.reason)
			if recs := records(t, st); len(recs) != 0 {
				t.Errorf("records after a refused reservation: %+v", recs)
			}
			if got := availableOf(t, lim, "team-a", "emr", "rpm"); got != 100 {
				t.Errorf("rpm %d after a refused reservation, want 100", got)
			}
		})
	}
}

// wantValidation checks that err is a *ValidationError of field whose reason
// contains reason.
func wantInvalidReason(t *testing.T, err error, field, reason string) {
	t.Helper()
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v, want a *ValidationError", err)
	}
	if ve.Field != field || !strings.Contains(ve.Reason, reason) {
		t.Errorf("ValidationError{Field: %q, Reason: %q}, want field %q, reason containing %q", ve.Field, ve.Reason, field, reason)
	}
}

// All or nothing: a reservation whose rate limit is exhausted reserves
// nothing.
func TestReservationAllOrNothing(t *testing.T) {
	ctx := context.Background()
	lim, adm, st := newReservations(t)
	mustCreate(t, adm, tollgate.Entity{ID: "team-a"})
	if err := adm.SetLimits(ctx, tollgate.EntityScope("team-a", "emr"), tollgate.Config{Limits: []tollgate.Limit{
		tollgate.ReservedLimit("clusters", 3), tollgate.PerMinute("rpm", 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(lim, "team-a", "j-1"); err != nil {
		t.Fatal(err)
	}
	_, err := reserve(lim, "team-a", "j-2")
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || ex.Primary().Limit != "rpm" {
		t.Fatalf("reserve with rpm exhausted: %v, want denied by rpm", err)
	}
	if got := reservedIDs(t, adm, "team-a", "", 10); !slices.Equal(got, []string{"j-1"}) {
		t.Errorf("reserved %v, want [j-1]", got)
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != 2 {
		t.Errorf("%d clusters free, want 2", got)
	}
	if _, err := adm.Reservation(ctx, "j-2"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("Reservation(j-2) = %v, want ErrLeaseNotFound", err)
	}
	if n := len(records(t, st)); n != 1 {
		t.Errorf("%d lease records, want 1", n)
	}
}

// A reserved limit stored at any of the four levels is resolved as any
// limit is.
func TestReservationStoredLevels(t *testing.T) {
	gpus := tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("gpus", 2)}}
	for _, scope := range []tollgate.Scope{
		tollgate.SystemScope(), tollgate.ResourceScope("gpu"), tollgate.EntityScope("lab", ""), tollgate.EntityScope("lab", "gpu"),
	} {
		t.Run(scope.Level(), func(t *testing.T) {
			ctx := context.Background()
			lim, adm, _ := newPair(t, memory.New())
			mustCreate(t, adm, tollgate.Entity{ID: "lab"})
			if err := adm.SetLimits(ctx, scope, gpus); err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{nil, nil, tollgate.ErrRateLimited} {
				_, err := lim.Acquire(ctx, "lab", "gpu", tollgate.Consume{"gpus": 1}, tollgate.WithReservation(fmt.Sprintf("job-%d", i)))
				if !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Errorf("reservation %d: %v, want %v", i, err, want)
				}
			}
			got, err := adm.Reservation(ctx, "job-1")
			if err != nil || got.Entity != "lab" || got.Resource != "gpu" {
				t.Errorf("Reservation(job-1) = %+v, %v", got, err)
			}
		})
	}
}

// A cascade reserves in the parent's reserved limit too: the organisation's
// 2 clusters bound its teams', each of 3.
func TestReservationCascade(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newReservations(t)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "team-a", ParentID: "org", Cascade: true})
	mustCreate(t, adm, tollgate.Entity{ID: "team-b", ParentID: "org", Cascade: true})
	if err := adm.SetLimits(ctx, tollgate.EntityScope("org", "emr"), tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("clusters", 2)}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ entity, id string }{{"team-a", "j-1"}, {"team-b", "j-2"}} {
		if _, err := reserve(lim, r.entity, r.id); err != nil {
			t.Fatalf("reserve %s for %s: %v", r.id, r.entity, err)
		}
	}
	_, err := reserve(lim, "team-a", "j-3")
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || ex.Primary().Entity != "org" || ex.Primary().Kind != tollgate.Reserved {
		t.Fatalf("third reservation: %v, want denied by org's reserved clusters", err)
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != 2 {
		t.Errorf("team-a's clusters free %d, want 2 (the denial debited nothing)", got)
	}
	if err := lim.Release(ctx, "j-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(lim, "team-a", "j-3"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if got := reservedIDs(t, adm, "team-a", "emr", 1); !slices.Equal(got, []string{"j-1", "j-3"}) {
		t.Errorf("team-a's reservations %v, want [j-1 j-3]", got)
	}
	if got := reservedIDs(t, adm, "org", "emr", 10); len(got) != 0 {
		t.Errorf("org's own reservations %v, want none: they are its teams'", got)
	}
}

// A reservation with an expiry is released by a reconciler after it; one
// without never expires.
func TestReservationExpiry(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, adm, clk := newPair(t, st)
	if err := adm.SetLimits(ctx, tollgate.ResourceScope("emr"), clusters); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(lim, "team-a", "short", tollgate.WithLeaseTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(lim, "team-a", "forever"); err != nil {
		t.Fatal(err)
	}
	r, err := adm.Reservation(ctx, "short")
	if err != nil || !r.Expires.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("Reservation(short) = %+v, %v; want it to expire in an hour", r, err)
	}
	if r, err := adm.Reservation(ctx, "forever"); err != nil || !r.Expires.IsZero() {
		t.Fatalf("Reservation(forever) = %+v, %v; want no expiry", r, err)
	}
	if n := reconcileAt(t, st, clk); n != 0 {
		t.Fatalf("reconciled %d before the expiry", n)
	}
	clk.Advance(time.Hour + time.Second)
	if n := reconcileAt(t, st, clk); n != 1 {
		t.Fatalf("reconciled %d after the expiry, want 1", n)
	}
	if _, err := adm.Reservation(ctx, "short"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("Reservation(short) after the reconciler: %v, want ErrLeaseNotFound", err)
	}
	if got := reservedIDs(t, adm, "team-a", "emr", 10); !slices.Equal(got, []string{"forever"}) {
		t.Errorf("reserved %v, want [forever]", got)
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != 2 {
		t.Errorf("%d clusters free, want 2", got)
	}
}

// Listing finds reservations among other durable leases of the bucket,
// page by page, and by id alone.
func TestReservationsList(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, adm, clk := newPair(t, st, tollgate.WithHolder("host/1"))
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("clusters", 100), tollgate.ConcurrencyLimit("inflight", 100)}}
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("j-%02d", i)
		resource := "emr"
		if i == 3 {
			resource = "batch"
		}
		if _, err := lim.Acquire(ctx, "team-a", resource, tollgate.Consume{"clusters": 1}, tollgate.WithReservation(id)); err != nil {
			t.Fatal(err)
		}
		if resource == "emr" {
			want = append(want, id)
		}
		// A concurrency lease between them: a durable lease, not a
		// reservation.
		mustAcquire(t, lim, "team-a", "emr", tollgate.Consume{"inflight": 1})
	}
	for _, page := range []int{1, 2, 3, 6, 7, 1000} {
		if got := reservedIDs(t, adm, "team-a", "emr", page); !slices.Equal(got, want) {
			t.Errorf("page %d: %v, want %v", page, got, want)
		}
	}
	if got := reservedIDs(t, adm, "team-a", "", 4); len(got) != 7 {
		t.Errorf("every resource: %v, want 7", got)
	}
	if got := reservedIDs(t, adm, "team-b", "", 4); len(got) != 0 {
		t.Errorf("another entity: %v, want none", got)
	}
	r, err := adm.Reservation(ctx, "j-03")
	wantR := tollgate.Reservation{ID: "j-03", Entity: "team-a", Resource: "batch", Holder: "host/1"}
	created := r.Created
	r.Created = time.Time{}
	if err != nil || r != wantR || !created.Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Errorf("Reservation(j-03) = %+v created %v, %v; want %+v created %v", r, created, err, wantR, clk.Now())
	}
	bad := []struct {
		entity, resource, after string
		limit                   int
		field                   string
	}{
		{"", "", "", 10, "entity"},
		{"team-a", "-emr", "", 10, "resource"},
		{"team-a", "", "-j", 10, "after"},
		{"team-a", "", "", 0, "limit"},
		{"team-a", "", "", 1001, "limit"},
	}
	for _, b := range bad {
		_, _, err := adm.Reservations(ctx, b.entity, b.resource, b.after, b.limit)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != b.field {
			t.Errorf("Reservations(%q, %q, %q, %d) = %v, want a ValidationError of %s", b.entity, b.resource, b.after, b.limit, err, b.field)
		}
	}
	for _, id := range []string{"", "-j"} {
		if _, err := adm.Reservation(ctx, id); !errors.Is(err, tollgate.ErrInvalid) {
			t.Errorf("Reservation(%q) = %v, want ErrInvalid", id, err)
		}
		if err := lim.Release(ctx, id); !errors.Is(err, tollgate.ErrInvalid) {
			t.Errorf("Release(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// Capacity reports a reserved limit as reserved.
func TestReservationCapacityKind(t *testing.T) {
	lim, adm, _ := newReservations(t)
	if _, err := reserve(lim, "team-a", "j-1"); err != nil {
		t.Fatal(err)
	}
	rc, err := adm.Capacity(context.Background(), "emr")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]tollgate.Kind{}
	for _, l := range rc.Limits {
		kinds[l.Limit] = l.Kind
	}
	if kinds["clusters"] != tollgate.Reserved || kinds["rpm"] != tollgate.Rate {
		t.Errorf("capacity kinds %v, want clusters reserved, rpm rate", kinds)
	}
}

// bucketsFirst is a store that judges the buckets before a lease record,
// as DynamoDB's transaction reports: while deny is set, every consume that
// carries a record is denied, whether or not its id is taken.
type bucketsFirst struct {
	store.Store
	deny bool
}

func (s *bucketsFirst) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if s.deny && req.Lease != nil {
		return false, nil
	}
	return s.Store.Consume(ctx, ns, req)
}

// A denial does not hide an id already held: its holder gets the
// reservation, anyone else a conflict, and an id not held the denial.
func TestReservationDenialHidesTakenID(t *testing.T) {
	st := &bucketsFirst{Store: memory.New()}
	lim, adm, _ := newPair(t, st)
	if err := adm.SetLimits(context.Background(), tollgate.ResourceScope("emr"), clusters); err != nil {
		t.Fatal(err)
	}
	first, err := reserve(lim, "team-a", "j-a")
	if err != nil {
		t.Fatal(err)
	}
	st.deny = true
	cases := []struct {
		entity, id string
		want       error // nil: the existing reservation
	}{
		{"team-a", "j-a", nil},
		{"team-b", "j-a", tollgate.ErrReservationConflict},
		{"team-a", "j-b", tollgate.ErrRateLimited},
	}
	for _, c := range cases {
		le, err := reserve(lim, c.entity, c.id)
		switch {
		case c.want == nil && (err != nil || le.ID() != first.ID()):
			t.Errorf("%s for %s: %v, lease %v; want the existing reservation", c.id, c.entity, err, le)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s for %s: %v, want %v", c.id, c.entity, err, c.want)
		}
	}
}
