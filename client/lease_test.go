package client_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
)

// available returns the Available of each limit by name.
func available(t *testing.T, c *client.Client, entity, resource string, opts ...client.AcquireOption) map[string]int64 {
	t.Helper()
	sts, err := c.Available(context.Background(), entity, resource, opts...)
	must(t, "Available", err)
	out := map[string]int64{}
	for _, s := range sts {
		out[s.Limit] = s.Available
	}
	return out
}

func TestLeaseLifecycle(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 10), tollgate.PerMinute("tpm", 1000))

	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1, "tpm": 100}, limits)
	must(t, "Acquire", err)
	if le.ID() == "" || le.Entity() != "key-1" || le.Resource() != "gpt" || le.Degraded() {
		t.Errorf("lease id %q entity %q resource %q degraded %v", le.ID(), le.Entity(), le.Resource(), le.Degraded())
	}
	if want := epoch.Add(server.DefaultLeaseTTL); !le.ExpiresAt().Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", le.ExpiresAt(), want)
	}
	if got, want := le.Consumed(), (tollgate.Consume{"rpm": 1, "tpm": 100}); !maps.Equal(got, want) {
		t.Errorf("Consumed = %v, want %v", got, want)
	}
	st := map[string]tollgate.Status{}
	for _, s := range le.Statuses() {
		st[s.Limit] = s
	}
	if s := st["tpm"]; s.Capacity != 1000 || s.Available != 900 || s.Requested != 100 || s.Exceeded || s.Entity != "key-1" {
		t.Errorf("tpm status = %+v", s)
	}
	if s := st["rpm"]; s.Capacity != 10 || s.Available != 9 || s.Kind != tollgate.Rate {
		t.Errorf("rpm status = %+v", s)
	}

	must(t, "Adjust +50", le.Adjust(ctx, tollgate.Consume{"tpm": 50}))
	if got := le.Consumed()["tpm"]; got != 150 {
		t.Errorf("after +50, Consumed tpm = %d, want 150", got)
	}
	must(t, "Adjust -30", le.Adjust(ctx, tollgate.Consume{"tpm": -30}))
	if got := le.Consumed()["tpm"]; got != 120 {
		t.Errorf("after -30, Consumed tpm = %d, want 120", got)
	}
	// Adjustments are written at commit.
	if got := available(t, c, "key-1", "gpt", limits)["tpm"]; got != 900 {
		t.Errorf("before commit, available tpm = %d, want 900", got)
	}
	must(t, "Commit", le.Commit(ctx))
	if got := available(t, c, "key-1", "gpt", limits); got["tpm"] != 880 || got["rpm"] != 9 {
		t.Errorf("after commit, available = %v, want tpm 880 rpm 9", got)
	}
	if le.Consumed() != nil || le.Statuses() != nil {
		t.Errorf("ended lease: Consumed %v Statuses %v, want nil", le.Consumed(), le.Statuses())
	}
}

func TestAdjustUnknownLimitIsInvalid(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 10)))
	must(t, "Acquire", err)
	err = le.Adjust(ctx, tollgate.Consume{"nope": 1})
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, tollgate.ErrInvalid) {
		t.Fatalf("Adjust of an unknown limit: err = %v (%T), want *ValidationError", err, err)
	}
	must(t, "Rollback after a failed Adjust", le.Rollback(ctx))
}

// A refund beyond what the lease consumed is the library's validation
// error, field and value included, and leaves the lease as it was.
func TestAdjustBelowZeroNetIsInvalid(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 10)))
	must(t, "Acquire", err)
	err = le.Adjust(ctx, tollgate.Consume{"rpm": -2})
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field != "consume.rpm" || ve.Value != "-2" {
		t.Fatalf("Adjust below zero: err = %v (%T), want *ValidationError on consume.rpm, value -2", err, err)
	}
	if got := le.Consumed(); got["rpm"] != 1 {
		t.Errorf("Consumed %v after the rejected adjustment, want rpm 1", got)
	}
	must(t, "Adjust -1", le.Adjust(ctx, tollgate.Consume{"rpm": -1}))
	must(t, "Commit", le.Commit(ctx))
}

// An adjustment that would take the lease's net consumption above
// MaxTokens is the library's validation error, whether it is one
// adjustment or the second of two, and leaves the lease as it was.
func TestAdjustAboveMaxTokensIsInvalid(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 500}, client.WithLimits(tollgate.PerMinute("tpm", 1000)))
	must(t, "Acquire", err)
	probe := tollgate.Consume{"tpm": 4_600_000_000_000_000}
	must(t, "Adjust", le.Adjust(ctx, probe))
	for _, delta := range []tollgate.Consume{probe, {"tpm": model.MaxTokens}} {
		err = le.Adjust(ctx, delta)
		var ve *tollgate.ValidationError
		if !errors.As(err, &ve) || ve.Field != "consume.tpm" {
			t.Fatalf("Adjust(%v): err = %v (%T), want *ValidationError on consume.tpm", delta, err, err)
		}
	}
	if got := le.Consumed()["tpm"]; got != 500+probe["tpm"] {
		t.Errorf("Consumed tpm %d after the refused adjustments, want %d", got, 500+probe["tpm"])
	}
	must(t, "Rollback", le.Rollback(ctx))
}

// A nil Consume or limits goes out as an empty object or list, never as
// null, which the server refuses: the answers are the library's.
func TestNilIsNotNull(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	_, err := c.Acquire(ctx, "key-1", "gpt", nil, client.WithLimits(tollgate.PerMinute("tpm", 1000)))
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field != "consume" || strings.Contains(ve.Reason, "null") {
		t.Errorf("Acquire with nil consume: %v, want the library's invalid consume", err)
	}
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 1}, client.WithLimits(tollgate.PerMinute("tpm", 1000)))
	must(t, "Acquire", err)
	must(t, "Adjust(nil)", le.Adjust(ctx, nil))
	err = le.Penalize(ctx, epoch.Add(time.Minute), "", nil)
	if !errors.As(err, &ve) || ve.Field != "limits" || strings.Contains(ve.Reason, "null") {
		t.Errorf("Penalize with nil limits: %v, want the library's invalid limits", err)
	}
	must(t, "Commit", le.Commit(ctx))
}

func TestRollbackRestoresAvailability(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("tpm", 1000), tollgate.ConcurrencyLimit("inflight", 2))
	before, err := c.Available(ctx, "key-1", "gpt", limits)
	must(t, "Available", err)

	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 300, "inflight": 1}, limits)
	must(t, "Acquire", err)
	must(t, "Adjust", le.Adjust(ctx, tollgate.Consume{"tpm": 200}))
	if got := available(t, c, "key-1", "gpt", limits); got["tpm"] != 700 || got["inflight"] != 1 {
		t.Errorf("while held, available = %v, want tpm 700 inflight 1", got)
	}
	must(t, "Rollback", le.Rollback(ctx))
	after, err := c.Available(ctx, "key-1", "gpt", limits)
	must(t, "Available", err)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("after rollback:\n got %+v\nwant %+v", after, before)
	}
}

func TestRateLimitedThenRefilled(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 2))
	for range 2 {
		_, err := c.AcquireAndCommit(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		must(t, "AcquireAndCommit", err)
	}

	_, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || !errors.Is(err, tollgate.ErrRateLimited) {
		t.Fatalf("third acquire: err = %v (%T), want *RateLimitExceeded", err, err)
	}
	if ex.RetryAfter != 30*time.Second { // 2 a minute: one token every 30s
		t.Errorf("RetryAfter = %v, want 30s", ex.RetryAfter)
	}
	want := []tollgate.Status{{Entity: "key-1", Resource: "gpt", Limit: "rpm", Kind: tollgate.Rate,
		Capacity: 2, Available: 0, Requested: 1, Exceeded: true, RetryAfter: 30 * time.Second, RetryAfterMS: 30_000, Source: tollgate.SourceCall, Window: time.Minute}}
	if !reflect.DeepEqual(ex.Statuses, want) {
		t.Errorf("Statuses:\n got %+v\nwant %+v", ex.Statuses, want)
	}

	e.clk.Advance(30*time.Second - time.Millisecond)
	_, err = c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	if !errors.As(err, &ex) || ex.RetryAfter != time.Millisecond {
		t.Fatalf("1ms early: err = %v, want a denial with RetryAfter 1ms", err)
	}
	e.clk.Advance(time.Millisecond)
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	must(t, "Acquire after refill", err)
	must(t, "Commit", le.Commit(ctx))
}

func TestAcquireAndCommit(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("tpm", 1000), tollgate.ConcurrencyLimit("inflight", 1))
	g, err := c.AcquireAndCommit(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 400, "inflight": 1}, limits)
	must(t, "AcquireAndCommit", err)
	if want := (tollgate.Consume{"tpm": 400, "inflight": 1}); !maps.Equal(g.Consumed, want) || g.Degraded {
		t.Errorf("grant = %+v, want consumed %v, not degraded", g, want)
	}
	if len(g.Statuses) != 2 {
		t.Errorf("grant statuses = %+v, want 2", g.Statuses)
	}
	// Committed at once: the one concurrency slot is free again.
	g, err = c.AcquireAndCommit(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 400, "inflight": 1}, limits)
	must(t, "second AcquireAndCommit (inflight 1)", err)
	if got := available(t, c, "key-1", "gpt", limits); got["tpm"] != 200 || got["inflight"] != 1 {
		t.Errorf("available = %v, want tpm 200 inflight 1", got)
	}
}

func TestLeaseUsedAfterEnd(t *testing.T) {
	c := newEnv(t).client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 10))
	committed, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	must(t, "Acquire", err)
	must(t, "Commit", committed.Commit(ctx))
	rolledBack, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	must(t, "Acquire", err)
	must(t, "Rollback", rolledBack.Rollback(ctx))
	for name, le := range map[string]*client.Lease{"committed": committed, "rolled back": rolledBack} {
		wantErr(t, name+": Commit", le.Commit(ctx), tollgate.ErrLeaseClosed)
		wantErr(t, name+": Rollback", le.Rollback(ctx), tollgate.ErrLeaseClosed)
		wantErr(t, name+": Adjust", le.Adjust(ctx, tollgate.Consume{"rpm": 1}), tollgate.ErrLeaseClosed)

		// A second handle does not know the lease ended: the server says
		// how (a commit again is answered as the first, a rollback again
		// is done), and the handle is closed too.
		other := client.LeaseHandle(c, le.ID())
		err := other.Adjust(ctx, tollgate.Consume{"rpm": 1})
		var ended *tollgate.LeaseEndedError
		if !errors.As(err, &ended) || ended.ID != le.ID() || (ended.How == "committed") != (name == "committed") {
			t.Errorf("%s: Adjust of a second handle: %v, want a *LeaseEndedError saying how", name, err)
		}
		if !client.LeaseClosed(other) {
			t.Errorf("%s: second handle still open after the server said lease_closed", name)
		}
		other = client.LeaseHandle(c, le.ID())
		if name == "committed" {
			must(t, name+": Commit of a second handle (the first commit's answer)", other.Commit(ctx))
			wantErr(t, name+": Rollback of a third handle", client.LeaseHandle(c, le.ID()).Rollback(ctx), tollgate.ErrLeaseClosed)
		} else {
			must(t, name+": Rollback of a second handle (done already)", other.Rollback(ctx))
			wantErr(t, name+": Commit of a third handle", client.LeaseHandle(c, le.ID()).Commit(ctx), tollgate.ErrLeaseClosed)
		}
	}
	// A lease never granted is 404 lease_not_found, which closes the handle.
	never := client.LeaseHandle(c, strings.Repeat("0", 32))
	err = never.Commit(ctx)
	wantErr(t, "Commit of a lease never granted", err, tollgate.ErrLeaseNotFound)
	var se *api.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound || !client.LeaseClosed(never) {
		t.Errorf("lease never granted: %v, want a 404 that closes the handle", err)
	}
}

func TestExpiredLeaseIsNotFound(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("tpm", 1000))
	le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"tpm": 100}, limits, client.WithLeaseTTL(2*time.Second))
	must(t, "Acquire", err)
	if want := epoch.Add(2 * time.Second); !le.ExpiresAt().Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", le.ExpiresAt(), want)
	}
	e.clk.Advance(2 * time.Second)
	wantErr(t, "Adjust of an expired lease", le.Adjust(ctx, tollgate.Consume{"tpm": 1}), api.ErrLeaseNotFound)
	// The 404 closed the handle: no further call reaches the server.
	wantErr(t, "Rollback of an expired lease", le.Rollback(ctx), tollgate.ErrLeaseClosed)
	// An expired lease stands as committed: 900 left, plus 2s of refill
	// at 1000 a minute (33.3).
	if got := available(t, c, "key-1", "gpt", limits)["tpm"]; got != 933 {
		t.Errorf("available tpm = %d, want 933 (expired lease stands)", got)
	}
}

// The option is refused before the server is asked, with the library's
// error: the same field, lease_ttl, as Limiter.Acquire names.
func TestLeaseTTLOutOfRangeIsInvalid(t *testing.T) {
	c := newEnv(t).client(t)
	_, err := c.Acquire(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 1},
		client.WithLimits(tollgate.PerMinute("rpm", 10)), client.WithLeaseTTL(500*time.Millisecond))
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field != "lease_ttl" {
		t.Fatalf("TTL 500ms: err = %v, want *ValidationError on lease_ttl", err)
	}
}

func TestLeaseOfAnotherNamespaceIsNotFound(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(t)
	_, err := admin.RegisterNamespace(ctx, "tenant-b")
	must(t, "RegisterNamespace", err)
	a, b := e.client(t), e.client(t, client.WithNamespace("tenant-b"))
	le, err := a.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 10)))
	must(t, "Acquire", err)
	wantErr(t, "Commit from another namespace", client.LeaseHandle(b, le.ID()).Commit(ctx), api.ErrLeaseNotFound)
	must(t, "Commit from its own namespace", le.Commit(ctx))
}

func TestConcurrentAcquiresGrantExactlyCapacity(t *testing.T) {
	const capacity, workers, attempts = 5, 16, 4
	c := newEnv(t).client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", capacity))
	var (
		mu              sync.Mutex
		granted, denied int
		unexpected      []error
		wg              sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range attempts {
				le, err := c.Acquire(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
				if err == nil {
					err = le.Commit(ctx)
				}
				mu.Lock()
				switch {
				case err == nil:
					granted++
				case errors.Is(err, tollgate.ErrRateLimited):
					denied++
				default:
					unexpected = append(unexpected, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != capacity || denied != workers*attempts-capacity || len(unexpected) > 0 {
		t.Fatalf("granted %d, denied %d, errors %v; want %d granted, %d denied", granted, denied, unexpected, capacity, workers*attempts-capacity)
	}
}

// Extend keeps a lease past its TTL: the expiry moves to d from now, on
// the server and in ExpiresAt, and the lease commits after its first TTL.
// Bad durations are refused (zero without a call); an ended lease is
// closed.
func TestLeaseExtend(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	le, err := c.Acquire(ctx, "key-1", "jobs", tollgate.Consume{"slots": 1}, limits, client.WithLeaseTTL(2*time.Second))
	must(t, "Acquire", err)
	e.clk.Advance(time.Second)
	must(t, "Extend 10s", le.Extend(ctx, 10*time.Second))
	if want := epoch.Add(11 * time.Second); !le.ExpiresAt().Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", le.ExpiresAt(), want)
	}
	for _, d := range []time.Duration{0, -time.Second, 500 * time.Millisecond, 25 * time.Hour} {
		var ve *tollgate.ValidationError
		if err := le.Extend(ctx, d); !errors.As(err, &ve) || ve.Field != "ttl_ms" {
			t.Errorf("Extend(%v) = %v, want *ValidationError on ttl_ms", d, err)
		}
	}
	e.clk.Advance(5 * time.Second) // past the first TTL, within the extended one
	must(t, "Commit after the first TTL", le.Commit(ctx))
	wantErr(t, "Extend of an ended lease", le.Extend(ctx, time.Minute), tollgate.ErrLeaseClosed)
	_, err = c.AcquireAndCommit(ctx, "key-1", "jobs", tollgate.Consume{"slots": 1}, limits)
	must(t, "the slot after the commit", err)
}
