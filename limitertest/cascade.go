package limitertest

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func cascadeCases() []testCase {
	return []testCase{
		{"DebitsChain", testCascadeDebitsChain},
		{"ViolationNamesBlocker", testCascadeViolation},
		{"UnknownEntity", testCascadeUnknownEntity},
		{"StopsAtDeletedParent", testCascadeDeletedParent},
		{"DenyCacheExact", testCascadeDenyCacheExact},
	}
}

// chain creates acct <- org <- proj <- key (cascade on key and proj, not on
// org) and key2 under proj without cascade, each with its own stored limits.
func (e *env) chain() {
	e.t.Helper()
	for _, ent := range []tollgate.Entity{
		{ID: "acct"},
		{ID: "org", ParentID: "acct"},
		{ID: "proj", ParentID: "org", Cascade: true},
		{ID: "key", ParentID: "proj", Cascade: true},
		{ID: "key2", ParentID: "proj"},
	} {
		if _, err := e.admin().CreateEntity(e.ctx, ent); err != nil {
			e.t.Fatal(err)
		}
	}
	setConfig(e.t, e.admin(), tollgate.EntityScope("key", ""), tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000))
	setConfig(e.t, e.admin(), tollgate.EntityScope("proj", "gpt"), tollgate.PerMinute("rpm", 50), tollgate.PerMinute("tpm", 5_000))
	setConfig(e.t, e.admin(), tollgate.EntityScope("org", ""), tollgate.PerMinute("rpm", 10)) // no tpm at the org
	setConfig(e.t, e.admin(), tollgate.EntityScope("acct", ""), tollgate.PerMinute("rpm", 1_000))
	setConfig(e.t, e.admin(), tollgate.ResourceScope("gpt"), tollgate.PerMinute("rpm", 7), tollgate.PerMinute("tpm", 700))
}

// wantChain checks the rpm and tpm balances of key, proj and org (-1: the
// limit is not in effect there).
func (e *env) wantChain(lim *tollgate.Limiter, of string, want map[string][2]int64) {
	e.t.Helper()
	st, err := lim.Available(e.ctx, of, "gpt")
	if err != nil {
		e.t.Fatalf("Available(%s): %v", of, err)
	}
	got := map[string][2]int64{}
	for _, s := range st {
		v, ok := got[s.Entity]
		if !ok {
			v = [2]int64{-1, -1}
		}
		switch s.Limit {
		case "rpm":
			v[0] = s.Available
		case "tpm":
			v[1] = s.Available
		}
		got[s.Entity] = v
	}
	if !maps.Equal(got, want) {
		e.t.Errorf("Available(%s) = %v, want %v", of, got, want)
	}
}

func testCascadeDebitsChain(t *testing.T, e *env) {
	lim := e.limiter()
	e.chain()

	le := e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 100})
	caps := map[string]int64{}
	for _, s := range le.Statuses() {
		if s.Limit == "rpm" {
			caps[s.Entity] = s.Capacity
		}
	}
	if want := map[string]int64{"key": 100, "proj": 50, "org": 10}; !maps.Equal(caps, want) {
		t.Errorf("rpm capacities along the chain = %v, want %v (each entity's own limits)", caps, want)
	}
	// Consumed is what the caller asked; each level's debit is in its status.
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1, "tpm": 100}) {
		t.Errorf("Consumed = %v, want rpm 1 tpm 100 (what was asked, not the 3 levels' sum)", got)
	}
	debits := map[string]int64{}
	for _, s := range le.Statuses() {
		debits[s.Entity+"/"+s.Limit] = s.Requested
	}
	if want := map[string]int64{"key/rpm": 1, "proj/rpm": 1, "org/rpm": 1, "key/tpm": 100, "proj/tpm": 100}; !maps.Equal(debits, want) {
		t.Errorf("each level's debit in the statuses = %v, want %v", debits, want)
	}
	// Written on enter, at every level.
	e.wantChain(lim, "key", map[string][2]int64{"key": {99, 9_900}, "proj": {49, 4_900}, "org": {9, -1}})
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": 50}); err != nil {
		t.Fatal(err)
	}
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1, "tpm": 150}) {
		t.Errorf("Consumed after Adjust = %v, want rpm 1 tpm 150", got)
	}
	e.commit(le)
	e.wantChain(lim, "key", map[string][2]int64{"key": {99, 9_850}, "proj": {49, 4_850}, "org": {9, -1}})
	// The cascade stopped at org (no cascade there): acct was not touched.
	if rec := e.Read(storetest.Key("acct", "gpt"))[0]; rec != nil {
		t.Errorf("acct bucket exists: %+v", rec)
	}

	// proj cascades to org only.
	e.commit(e.acquire(lim, "proj", "gpt", tollgate.Consume{"rpm": 2}))
	e.wantChain(lim, "proj", map[string][2]int64{"proj": {47, 4_850}, "org": {7, -1}})
	// key2 does not cascade: resolved from the resource config, alone.
	le = e.acquire(lim, "key2", "gpt", tollgate.Consume{"rpm": 1, "tpm": 10})
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1, "tpm": 10}) {
		t.Errorf("key2 Consumed = %v", got)
	}
	e.rollback(le)
	e.commit(e.acquire(lim, "key2", "gpt", tollgate.Consume{"rpm": 1}))
	e.wantChain(lim, "key2", map[string][2]int64{"key2": {6, 700}})
	e.wantChain(lim, "key", map[string][2]int64{"key": {99, 9_850}, "proj": {47, 4_850}, "org": {7, -1}})
	// org and acct alone.
	e.commit(e.acquire(lim, "org", "gpt", tollgate.Consume{"rpm": 1}))
	e.wantChain(lim, "org", map[string][2]int64{"org": {6, -1}})
	e.wantChain(lim, "acct", map[string][2]int64{"acct": {1_000, -1}})

	// Rollback of a cascaded lease refunds every level.
	le = e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 6, "tpm": 1_000})
	e.wantChain(lim, "key", map[string][2]int64{"key": {93, 8_850}, "proj": {41, 3_850}, "org": {0, -1}})
	e.rollback(le)
	e.wantChain(lim, "key", map[string][2]int64{"key": {99, 9_850}, "proj": {47, 4_850}, "org": {6, -1}})
}

func testCascadeViolation(t *testing.T, e *env) {
	lim := e.limiter()
	e.chain()
	e.commit(e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 10, "tpm": 4_000}))
	e.wantChain(lim, "key", map[string][2]int64{"key": {90, 6_000}, "proj": {40, 1_000}, "org": {0, -1}})

	// The org blocks: it is named, and nothing is debited anywhere.
	ex := e.denied(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 1})
	p := ex.Primary()
	if p.Entity != "org" || p.Limit != "rpm" || p.Capacity != 10 || p.Available != 0 || p.Requested != 1 || p.RetryAfter != 6*time.Second {
		t.Errorf("Primary = %+v, want org's rpm, 6s", p)
	}
	if ex.RetryAfter != 6*time.Second {
		t.Errorf("RetryAfter = %v, want 6s", ex.RetryAfter)
	}
	if v := ex.Violations(); len(v) != 1 || v[0].Entity != "org" {
		t.Errorf("Violations = %+v, want only org's", v)
	}
	if n := len(ex.Passed()); n != 4 {
		t.Errorf("Passed has %d statuses, want 4 (key rpm tpm, proj rpm tpm): %+v", n, ex.Passed())
	}
	e.wantChain(lim, "key", map[string][2]int64{"key": {90, 6_000}, "proj": {40, 1_000}, "org": {0, -1}})
	e.denied(lim, "proj", "gpt", tollgate.Consume{"rpm": 1})

	// 6 s later the org has 1 token again and the project blocks on tpm:
	// key +10 rpm (capped at 100) +1000 tpm, proj +5 rpm +500 tpm, org +1.
	e.Advance(6_000)
	ex = e.denied(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 1_501})
	if p := ex.Primary(); p.Entity != "proj" || p.Limit != "tpm" || p.Available != 1_500 || p.RetryAfter != 12*time.Millisecond {
		t.Errorf("Primary = %+v, want proj's tpm, 1500 available, 12ms", p)
	}
	e.wantChain(lim, "key", map[string][2]int64{"key": {100, 7_000}, "proj": {45, 1_500}, "org": {1, -1}})
	// Both block: the primary is the longer wait. org rpm: 1 short at
	// 10/min = 6s; proj tpm: 100 short at 5000/min = 1.2s.
	ex = e.denied(lim, "key", "gpt", tollgate.Consume{"rpm": 2, "tpm": 1_600})
	if len(ex.Violations()) != 2 {
		t.Errorf("Violations = %+v, want org rpm and proj tpm", ex.Violations())
	}
	if p := ex.Primary(); p.Entity != "org" || ex.RetryAfter != 6*time.Second {
		t.Errorf("Primary = %+v RetryAfter %v, want org 6s", p, ex.RetryAfter)
	}
	if st := status(t, ex.Statuses, "proj", "tpm"); !st.Exceeded || st.RetryAfter != 1200*time.Millisecond {
		t.Errorf("proj tpm status = %+v, want exceeded, 1.2s", st)
	}
	e.wantChain(lim, "key", map[string][2]int64{"key": {100, 7_000}, "proj": {45, 1_500}, "org": {1, -1}})
	e.commit(e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 1_500}))
	e.wantChain(lim, "key", map[string][2]int64{"key": {99, 5_500}, "proj": {44, 0}, "org": {0, -1}})
}

func testCascadeUnknownEntity(t *testing.T, e *env) {
	lim := e.limiter()
	if _, err := lim.Acquire(e.ctx, "ghost", "gpt", tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("unknown entity without limits = %v, want ErrInvalid", err)
	}
	setConfig(t, e.admin(), tollgate.ResourceScope("gpt"), tollgate.PerMinute("rpm", 7))
	le := e.acquire(lim, "ghost", "gpt", tollgate.Consume{"rpm": 2})
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 2}) {
		t.Errorf("Consumed = %v", got)
	}
	e.commit(le)
	e.wantChain(lim, "ghost", map[string][2]int64{"ghost": {5, -1}})
	setConfig(t, e.admin(), tollgate.SystemScope(), tollgate.PerMinute("rpm", 3))
	e.commit(e.acquire(lim, "ghost", "other", tollgate.Consume{"rpm": 3}))
	e.denied(lim, "ghost", "other", tollgate.Consume{"rpm": 1})
	// Explicit limits.
	e.commit(e.acquire(lim, "ghost2", "x", tollgate.Consume{"a": 1}, tollgate.WithLimits(tollgate.PerSecond("a", 1))))
	e.denied(lim, "ghost2", "x", tollgate.Consume{"a": 1}, tollgate.WithLimits(tollgate.PerSecond("a", 1)))
	if _, err := e.admin().GetEntity(e.ctx, "ghost"); !errors.Is(err, tollgate.ErrEntityNotFound) {
		t.Errorf("acquiring created the entity: %v", err)
	}
}

// After a parent is deleted its children keep their ParentID, and "cascade
// stops at a missing parent" (store.Entities): the child's acquire works on
// its own limits and touches nothing of the deleted parent.
func testCascadeDeletedParent(t *testing.T, e *env) {
	lim := e.limiter()
	for _, ent := range []tollgate.Entity{{ID: "org"}, {ID: "proj", ParentID: "org", Cascade: true}, {ID: "key", ParentID: "proj", Cascade: true}} {
		if _, err := e.admin().CreateEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"key", "proj", "org"} {
		setConfig(t, e.admin(), tollgate.EntityScope(id, ""), tollgate.PerMinute("rpm", 10))
	}
	e.commit(e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 1}))
	e.wantChain(lim, "key", map[string][2]int64{"key": {9, -1}, "proj": {9, -1}, "org": {9, -1}})

	if err := e.admin().DeleteEntity(e.ctx, "proj"); err != nil {
		t.Fatal(err)
	}
	if rec := e.Read(storetest.Key("proj", "gpt"))[0]; rec != nil {
		t.Fatalf("deleted entity's bucket remains: %+v", rec)
	}
	le, err := lim.Acquire(e.ctx, "key", "gpt", tollgate.Consume{"rpm": 1})
	if err != nil {
		t.Fatalf("Acquire for a child of a deleted parent = %v, want granted on the child's own limits", err)
	}
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1}) {
		t.Errorf("Consumed = %v, want rpm 1 (the child only)", got)
	}
	e.commit(le)
	e.WantStored(storetest.Key("key", "gpt"), "rpm", bucket.State{Tokens: 8_000})
	if rec := e.Read(storetest.Key("proj", "gpt"))[0]; rec != nil {
		t.Errorf("the deleted parent's bucket was recreated: %+v", rec)
	}
	e.WantStored(storetest.Key("org", "gpt"), "rpm", bucket.State{Tokens: 9_000})
}
