package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
)

// remoteFaultStore is a faultStore that other processes share: its change
// generation is read by the change watch once per refresh interval, and
// can fail.
type remoteFaultStore struct{ *faultStore }

func (remoteFaultStore) LocalGeneration() bool { return false }

// TestFaultModeNotAskedOfAFailingStore: the stored unavailable mode is not
// read again from a store that has just failed to answer for it, nor from
// one whose change generation could not be read, so that a call meeting a
// stalled store waits for it once (docs/semantics.md 8), not again for the
// mode. The mode last seen holds meanwhile.
func TestFaultModeNotAskedOfAFailingStore(t *testing.T) {
	ctx := context.Background()
	c := tollgate.Consume{"rpm": 1}

	t.Run("a failed read is not repeated at once", func(t *testing.T) {
		lim, fs, clk := newFaultLim(t)
		mustAcquire(t, lim, "k", "api", c, rpm100) // the mode is read: none stored
		clk.Advance(tollgate.DefaultCacheTTL)      // and is to be read again
		fs.failOn(errConnReset, mGetConfigs, mConsume)
		fs.resetCounts()
		if _, err := lim.Acquire(ctx, "k", "api", c, rpm100); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable", err)
		}
		if n := fs.count(mGetConfigs); n != 1 {
			t.Errorf("the failing acquire read the system config %d times, want 1 (not again once it failed)", n)
		}
		for range 3 {
			_, _ = lim.Acquire(ctx, "k", "api", c, rpm100)
		}
		if n := fs.count(mGetConfigs); n != 1 {
			t.Errorf("%d reads of the system config after 4 acquires within a second of a failed one, want 1", n)
		}
		clk.Advance(time.Second)
		_, _ = lim.Acquire(ctx, "k", "api", c, rpm100)
		if n := fs.count(mGetConfigs); n != 2 {
			t.Errorf("%d reads of the system config a second later, want 2", n)
		}
	})

	t.Run("not asked while the generation cannot be read", func(t *testing.T) {
		fs := newFaultStore()
		lim, err := tollgate.New(remoteFaultStore{fs}, tollgate.WithRefreshInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		fs.failOn(errConnReset, mGeneration, mGetConfigs, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c, rpm100, tollgate.WithOnUnavailable(tollgate.Allow))
		if err != nil || !le.Degraded() {
			t.Fatalf("lease %s, err %v; want degraded", descLease(le), err)
		}
		if _, err := lim.Acquire(ctx, "k", "api", c, rpm100); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable (Block: no mode was ever read)", err)
		}
		if n := fs.count(mGeneration); n != 1 {
			t.Errorf("%d reads of the generation, want 1", n)
		}
		if n := fs.count(mGetConfigs); n != 0 {
			t.Errorf("%d reads of the system config while the store's generation could not be read, want 0", n)
		}
	})
}

// The unavailable mode an Admin stores at the system scope reaches the
// limiters of its namespace that follow its change watch, even when the
// store fails before they could read it; a limiter of another namespace on
// the same watch keeps its own (Block). Deleting the system config sets it
// back to Block, again without a read.
func TestFaultAdminModeNoteReachesLimitersOnItsWatch(t *testing.T) {
	ctx := context.Background()
	c := tollgate.Consume{"rpm": 1}
	everything := []string{mGeneration, mGetNamespace, mGetConfigs, mGetEntity, mConsume, mReadBuckets, mApplyDeltas}
	cases := []struct {
		name  string
		store func(*faultStore) store.Store
	}{
		{"local store", func(fs *faultStore) store.Store { return fs }},
		{"shared store", func(fs *faultStore) store.Store { return remoteFaultStore{fs} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFaultStore()
			s := tc.store(fs)
			w, err := tollgate.NewChangeWatch(s, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			lim, adm, _ := newPair(t, s, tollgate.WithChangeWatch(w))
			limB, admB, _ := newPair(t, s, tollgate.WithChangeWatch(w), tollgate.WithNamespace("tenant-b"))
			if _, err := admB.RegisterNamespace(ctx, "tenant-b"); err != nil {
				t.Fatal(err)
			}
			for _, l := range []*tollgate.Limiter{lim, limB} {
				mustAcquire(t, l, "k", "api", c, rpm100) // each reads the mode: none stored, Block
			}

			if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{OnUnavailable: tollgate.Allow}); err != nil {
				t.Fatal(err)
			}
			fs.failOn(errConnReset, everything...)
			for _, opt := range [][]tollgate.AcquireOption{{rpm100}, nil} { // explicit limits, stored ones
				le, err := lim.Acquire(ctx, "k", "api", c, opt...)
				if err != nil || !le.Degraded() {
					t.Errorf("limiter of the admin's namespace: lease %s, err %v; want degraded (Allow, noted)", descLease(le), err)
				}
			}
			if n := lim.Stats().Degraded; n != 2 {
				t.Errorf("Stats().Degraded = %d, want 2", n)
			}
			if mode := lim.UnavailableMode(ctx); mode != tollgate.Allow {
				t.Errorf("UnavailableMode = %q, want allow", mode)
			}
			if _, err := limB.Acquire(ctx, "k", "api", c, rpm100); !errors.Is(err, tollgate.ErrUnavailable) {
				t.Errorf("limiter of another namespace: err %v, want ErrUnavailable (Block: the note is not its namespace's)", err)
			}
			if n := limB.Stats().Degraded; n != 0 {
				t.Errorf("other namespace: Stats().Degraded = %d, want 0", n)
			}

			fs.heal()
			if err := adm.DeleteLimits(ctx, tollgate.SystemScope()); err != nil {
				t.Fatal(err)
			}
			fs.failOn(errConnReset, everything...)
			if _, err := lim.Acquire(ctx, "k", "api", c, rpm100); !errors.Is(err, tollgate.ErrUnavailable) {
				t.Errorf("after DeleteLimits(SystemScope): err %v, want ErrUnavailable (Block, noted)", err)
			}
			if n := lim.Stats().Degraded; n != 2 {
				t.Errorf("after DeleteLimits(SystemScope): Stats().Degraded = %d, want still 2", n)
			}
		})
	}
}
