package bucket

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/calendar"
)

func berlin(t *testing.T, s string) int64 {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

// quota is 3 tokens per Berlin day.
var quota = Params{Capacity: 3000, Amount: 3000, Period: 1, Window: calendar.Window{Unit: calendar.Day, Zone: "Europe/Berlin"}}

// A calendar quota refills nothing inside a window, all of its amount at
// the boundary (capped), and carries debt into the next window.
func TestCalendarRefill(t *testing.T) {
	morning, evening := berlin(t, "2026-03-29 06:00"), berlin(t, "2026-03-29 23:59")
	next, after := berlin(t, "2026-03-30 00:00"), berlin(t, "2026-04-01 12:00")
	s := State{Tokens: 1000}
	if got := RefillBetween(s, quota, morning, evening); got != s {
		t.Errorf("within a day: %+v, want %+v", got, s)
	}
	if got := RefillBetween(s, quota, morning, next); got.Tokens != 3000 {
		t.Errorf("at midnight: %d millitokens, want 3000", got.Tokens)
	}
	debt := State{Tokens: -5000}
	if got := RefillBetween(debt, quota, morning, next); got.Tokens != -2000 {
		t.Errorf("debt after one boundary: %d, want -2000", got.Tokens)
	}
	if got := RefillBetween(debt, quota, morning, after); got.Tokens != 3000 {
		t.Errorf("debt after three boundaries: %d, want 3000", got.Tokens)
	}
	// The wait is to the boundary that brings enough: the next midnight
	// (the day of the spring change lasts 23 hours), or the one after.
	if got, want := RetryAt(State{}, quota, 1000, morning), next-morning; got != want {
		t.Errorf("RetryAt one token = %d ms, want %d (to midnight)", got, want)
	}
	if got, want := RetryAt(debt, quota, 1000, morning), berlin(t, "2026-03-31 00:00")-morning; got != want {
		t.Errorf("RetryAt from debt = %d ms, want %d (two midnights)", got, want)
	}
	if got := RetryAt(State{Tokens: 3000}, quota, 3000, morning); got != 0 {
		t.Errorf("RetryAt when covered = %d", got)
	}
	if got := RetryAt(State{}, quota, 4000, morning); got != Never {
		t.Errorf("RetryAt above capacity = %d, want Never", got)
	}
	if next-morning != 18*3600*1000 {
		t.Fatalf("test setup: %d ms from 06:00 to midnight", next-morning)
	}
}

// A quota's full tick behaves as a continuous limit's: the state it says
// at any later instant is RefillBetween's, and FullAt is the boundary at
// which it is full again.
func TestCalendarFullTicks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lo := berlin(t, "2026-01-01 00:00")
	for range 2000 {
		at := lo + r.Int64N(400*24*3600*1000)
		now := at + r.Int64N(10*24*3600*1000)
		s := State{Tokens: r.Int64N(20000) - 17000}
		ft := FullTick(s, quota, at)
		if got, want := AtTick(ft, quota, now), RefillBetween(s, quota, at, now); got != want {
			t.Fatalf("state at %d of %+v at %d: AtTick %+v, RefillBetween %+v", now, s, at, got, want)
		}
		full := FullAt(ft, quota)
		if AtTick(ft, quota, full).Tokens != quota.Capacity || AtTick(ft, quota, full-1).Tokens == quota.Capacity && s.Tokens < quota.Capacity && full > at {
			t.Fatalf("%+v at %d: FullAt %d is not the first full instant", s, at, full)
		}
		if w := quota.Window; full > at && w.Start(w.Index(full)) != full {
			t.Fatalf("%+v at %d: full at %d, not a boundary", s, at, full)
		}
	}
}

func TestCalendarParamsValidate(t *testing.T) {
	bad := []Params{
		{Capacity: 3000, Amount: 3000, Period: 1000, Window: quota.Window},
		{Capacity: 3000, Window: quota.Window},
		{Capacity: 3000, Amount: 3000, Period: 1, Window: calendar.Window{Unit: calendar.Day, Zone: "Nowhere/Land"}},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
	if err := quota.Validate(); err != nil {
		t.Errorf("quota: %v", err)
	}
}
