package dynamodb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// The exactness of a planned write, without DynamoDB: a batch is simulated
// against an assumed image; the write carries, per limit, the interval of
// stored values it is valid for (or the exact value of a rebase). For any
// stored item that satisfies the write's condition, applying the write's
// update must leave exactly what applying the parts one by one would
// (grants, refusals, observed states and the final state alike); and the
// assumed item itself must satisfy the condition.
//
// The reference applies the parts one by one in the full-tick form
// (bucket.AtTick is bucket.Refill, see bucket/tick_test.go): a part is
// granted when every checked limit covers its amount at the part's time,
// and a debit of c at t sets G to max(G, t·Amount) + c·Period.

func TestPlanIsExactForEveryStateInItsCondition(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	var writes, tried, held int
	for scenario := range 4000 {
		sc := randScenario(r)
		sim := simulate(sc.img, sc.batch, true)
		if !sim.needsWrite() {
			continue
		}
		writes++
		if !pathsHold(sim, sc.img) {
			t.Fatalf("scenario %d: the assumed image fails its own write's condition\n%s", scenario, sc)
		}
		for range 20 {
			actual := perturb(r, sc.img)
			tried++
			if !pathsHold(sim, actual) {
				continue
			}
			held++
			checkAgainstReference(t, scenario, sc, sim, actual)
		}
	}
	if writes < 1000 || held < writes*3 {
		t.Fatalf("too few cases: %d writes, %d of %d perturbed items took the path", writes, held, tried)
	}
	t.Logf("%d writes, %d of %d perturbed items took the planned path", writes, held, tried)
}

// scenario is an assumed image and a batch of parts for it.
type scenario struct {
	img   *image
	batch *batch
}

func (sc scenario) String() string {
	s := fmt.Sprintf("image rf %d:", sc.img.rf)
	for _, l := range sc.img.limits {
		s += fmt.Sprintf(" %s%+v ft=%v tk=%d legacy=%v", l.name, l.params, l.ft, l.tk, l.legacy)
	}
	for _, p := range sc.batch.parts {
		s += fmt.Sprintf("\n  part at %d:", p.now)
		for _, lr := range p.req.Limits {
			s += fmt.Sprintf(" %s check=%v amount=%d", lr.Name, lr.Check, lr.Amount)
		}
	}
	return s
}

func randScenario(r *rand.Rand) scenario {
	const base = int64(1_700_000_000_000)
	type lim struct {
		name   string
		params bucket.Params
	}
	var limits []lim
	for i := range 1 + r.IntN(3) {
		p := bucket.Params{Capacity: 1_000 * (1 + r.Int64N(20)), Amount: 1_000 * (1 + r.Int64N(5)), Period: []int64{1, 7, 1000, 60_000}[r.IntN(4)]}
		if r.IntN(4) == 0 {
			p.Amount, p.Period = 0, 0 // a concurrency limit
		}
		limits = append(limits, lim{fmt.Sprintf("l%d", i), p})
	}
	img := &image{exists: true, shards: 1, rf: base + r.Int64N(50), ttl: base / 1000, hasTTL: true}
	for _, l := range limits {
		stored := l.params
		switch r.IntN(8) {
		case 0:
			continue // absent from the item
		case 1:
			stored.Capacity += 1_000 * (1 + r.Int64N(3)) // other parameters: a rebase
		}
		il := imageLimit{name: l.name, params: stored}
		st := bucket.State{Tokens: r.Int64N(stored.Capacity+1) - r.Int64N(3)*1_000}
		switch {
		case !stored.Refills():
			il.tk = st.Tokens
		case r.IntN(6) == 0:
			il.legacy, il.tk, il.rm = true, st.Tokens, r.Int64N(stored.Period)
		default:
			il.ft = bucket.FullTick(st, stored, img.rf-r.Int64N(100))
		}
		img.limits = append(img.limits, il)
	}
	b := &batch{id: itemID{"ns", store.BucketKey{Entity: "e", Resource: "r"}, 0}}
	for range 1 + r.IntN(6) {
		req := &store.BucketRequest{Key: b.id.key}
		for _, l := range limits {
			amount := 1_000 * r.Int64N(4)
			if r.IntN(10) == 0 {
				amount = l.params.Capacity + 1_000 // more than it can ever hold
			}
			req.Limits = append(req.Limits, store.LimitRequest{Name: l.name, Params: l.params, Check: r.IntN(8) != 0, Amount: amount})
		}
		b.parts = append(b.parts, newPart(req, img.rf-20+r.Int64N(200), 1, true, nil))
	}
	return scenario{img, b}
}

// perturb returns img with its relative state moved a little (as other
// writers would have): full ticks and balances only.
func perturb(r *rand.Rand, img *image) *image {
	out := img.clone()
	for i := range out.limits {
		l := &out.limits[i]
		if r.IntN(3) == 0 || l.legacy {
			continue
		}
		if l.params.Refills() {
			l.ft = l.ft.Add(bucket.TickOf(r.Int64N(4_000_000) - 2_000_000))
		} else {
			l.tk += 1_000 * (r.Int64N(5) - 2)
		}
	}
	return out
}

// pathsHold evaluates the write's condition, as DynamoDB would, on actual:
// the per-limit intervals and the exact values of rebases.
func pathsHold(sim *simulation, actual *image) bool {
	for j := range sim.paths {
		p := &sim.paths[j]
		i := actual.find(p.name)
		if p.rebase {
			if p.stored == nil {
				if i >= 0 {
					return false
				}
				continue
			}
			a := actual.limits[i]
			if a.params != p.stored.params || a.legacy != p.stored.legacy || a.ft != p.stored.ft || a.tk != p.stored.tk || a.rm != p.stored.rm {
				return false
			}
			continue
		}
		if !(p.hasLo || p.hasHi || p.hasLoT || p.hasHiT || p.debit > 0) {
			continue
		}
		if i < 0 || actual.limits[i].params != p.params {
			return false
		}
		a := actual.limits[i]
		if p.refills() {
			if p.hasLo && a.ft.Cmp(p.lo) <= 0 || p.hasHi && a.ft.Cmp(p.hi) > 0 {
				return false
			}
		} else if p.hasLoT && a.tk < p.loT || p.hasHiT && a.tk > p.hiT {
			return false
		}
	}
	for _, i := range sim.extras {
		if !limitsEqual(actual.limits[i], sim.img.limits[i]) {
			return false
		}
	}
	return true
}

func limitsEqual(a, b imageLimit) bool { return a == b }

// checkAgainstReference applies the write (its outcome as replay computes
// it from actual, and its update as sim.after applies it) and compares
// with the parts applied one by one to actual.
func checkAgainstReference(t *testing.T, scenario int, sc scenario, plan *simulation, actual *image) {
	t.Helper()
	refused := make([]bool, len(plan.granted))
	for i, g := range plan.granted {
		refused[i] = !g
	}
	got := replay(actual, sc.batch, false, refused, plan.at)
	after := got.after(actual)
	ref := reference(actual, sc.batch, plan.at)
	for i := range sc.batch.parts {
		if got.granted[i] != ref.granted[i] {
			t.Fatalf("scenario %d, part %d: granted %v, one by one %v\n%s", scenario, i, got.granted[i], ref.granted[i], sc)
		}
		if got.granted[i] && fmt.Sprint(got.observed[i]) != fmt.Sprint(ref.observed[i]) {
			t.Fatalf("scenario %d, part %d: observed %v, one by one %v\n%s", scenario, i, got.observed[i], ref.observed[i], sc)
		}
	}
	for _, l := range after.limits {
		p, ok := ref.final[l.name]
		if !ok {
			continue
		}
		if l.params != p.params {
			t.Fatalf("scenario %d, limit %s: params %+v after the write, one by one %+v\n%s", scenario, l.name, l.params, p.params, sc)
		}
		// From the batch's last time on, the write and the reference must
		// agree exactly: the same state at every later time.
		last := slices.Max(plan.at)
		for _, d := range []int64{0, 1, 999, 60_000, 10_000_000} {
			if gs, rs := after.stateAt(&l, last+d), p.state(last+d); gs != rs {
				t.Fatalf("scenario %d, limit %s at +%d ms: %+v after the write, one by one %+v\n%s", scenario, l.name, d, gs, rs, sc)
			}
		}
	}
}

// refLimit is one limit as the reference keeps it.
type refLimit struct {
	params bucket.Params
	ft     bucket.Tick
	full   bool // full since before the batch (absent from the item)
	tk     int64
}

func (l *refLimit) state(now int64) bucket.State {
	switch {
	case !l.params.Refills():
		return bucket.Refill(bucket.State{Tokens: l.tk}, l.params, 0)
	case l.full:
		return bucket.Full(l.params)
	}
	return bucket.AtTick(l.ft, l.params, now)
}

type refOutcome struct {
	granted  []bool
	observed [][]bucket.State
	final    map[string]*refLimit
}

// reference applies the parts of b one by one to actual, part i at at[i].
// Limits stored with other parameters (or in the schema 1 form) are
// brought to the request's at the first part's time (docs/semantics.md 7),
// as the store does.
func reference(actual *image, b *batch, at []int64) refOutcome {
	out := refOutcome{granted: make([]bool, len(b.parts)), observed: make([][]bucket.State, len(b.parts)), final: map[string]*refLimit{}}
	sig := b.parts[0].req.Limits
	for _, lr := range sig {
		l := &refLimit{params: lr.Params}
		i := actual.find(lr.Name)
		switch {
		case i < 0:
			l.full, l.tk = true, lr.Params.Capacity
		case actual.limits[i].params == lr.Params && !actual.limits[i].legacy:
			l.ft, l.tk = actual.limits[i].ft, actual.limits[i].tk
		default:
			st := bucket.Reconfigure(actual.stateAt(&actual.limits[i], at[0]), actual.limits[i].params, lr.Params)
			if lr.Params.Refills() {
				l.ft = bucket.FullTick(st, lr.Params, at[0])
			} else {
				l.tk = st.Tokens
			}
		}
		out.final[lr.Name] = l
	}
	for i, p := range b.parts {
		now := at[i]
		obs := make([]bucket.State, len(sig))
		ok := true
		for j, lr := range p.req.Limits {
			obs[j] = out.final[lr.Name].state(now)
			ok = ok && (!lr.Check || obs[j].Tokens >= lr.Amount)
		}
		out.observed[i] = obs
		if !ok {
			continue
		}
		out.granted[i] = true
		for _, lr := range p.req.Limits {
			l := out.final[lr.Name]
			switch {
			case lr.Amount == 0:
			case !lr.Params.Refills():
				l.tk = bucket.ForceConsume(l.state(now), lr.Amount).Tokens
			default:
				g := bucket.TickAt(now, lr.Params)
				if !l.full && l.ft.Cmp(g) > 0 {
					g = l.ft
				}
				l.ft, l.full = g.Add(bucket.DebitTicks(lr.Amount, lr.Params)), false
			}
		}
	}
	return out
}
