package dynamodb

import (
	"math"
	"slices"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Planning a write.
//
// A batch of parts (requests for one bucket item, in order, each with its
// own time) is decided by simulating them one by one against an image of
// the item: each checked limit must cover its amount at the part's time,
// and every granted part debits its amounts. A refilling limit is its full
// tick G (bucket.FullTick), and a debit of c at now is
//
//	G + c·Period          if the limit is not full at now (G > now·Amount)
//	now·Amount + c·Period if it is (G <= now·Amount)
//
// so every step of the simulation is a comparison of G with a constant,
// and an addition or a constant result. The write then carries, per limit,
// the interval of stored values for which every comparison goes the way
// it went in the simulation (the limit's "path"), and the result: ADD the
// sum of the additions while no step found the limit full, else SET the
// constant the first full step started. If the stored value lies in the
// interval, the write does exactly what applying the parts one by one
// would have done, whatever the value; if not, the condition fails, the
// failed write returns the item, and the batch is simulated again from it.
// The simulation runs on a cached image, so a write usually needs no read;
// it is exact because it is conditioned on what it assumed, never on more
// than it needed.
//
// A concurrency limit (no refill) is its balance, and a debit subtracts;
// its path pins the balance from below (covers) and above (refusals, and
// the capacity: a balance above it must be clamped first, which an ADD
// cannot do). A limit that is absent from the item, stored with other
// parameters (docs/semantics.md 7), or in the schema 1 form is rebased: brought to
// its state at the batch's first time under the requested parameters
// (bucket.Reconfigure), conditioned on its stored value being exactly what
// was assumed, and SET.

// path is one limit's course through a batch.
type path struct {
	name   string
	params bucket.Params // as requested (the item's shard's)
	stored *imageLimit   // as assumed; nil: absent from the item

	// A rebased limit, or a refilling one that a step found full, has a
	// constant value: k (full tick; kFull: full since before the batch,
	// never debited) or kt (balance). Otherwise the value is the stored
	// one plus off (full tick), or minus offT (balance: what was debited).
	rebase   bool
	constant bool
	k        bucket.Tick
	kFull    bool
	kt       int64
	off      bucket.Tick
	offT     int64

	// The interval of stored values that takes this path: lo < G <= hi
	// for a full tick, loT <= tk <= hiT for a balance.
	lo, hi         bucket.Tick
	hasLo, hasHi   bool
	loT, hiT       int64
	hasLoT, hasHiT bool

	debit int64 // granted, in all
}

func (p *path) refills() bool { return p.params.Refills() }

// state returns the limit's state at now, at this point of the batch.
func (p *path) state(now int64) bucket.State {
	switch {
	case !p.refills() && p.constant:
		return bucket.Refill(bucket.State{Tokens: p.kt}, p.params, 0)
	case !p.refills():
		return bucket.Refill(bucket.ForceConsume(bucket.State{Tokens: p.stored.tk}, p.offT), p.params, 0)
	case p.constant && p.kFull:
		return bucket.Full(p.params)
	case p.constant:
		return bucket.AtTick(p.k, p.params, now)
	}
	return bucket.AtTick(p.stored.ft.Add(p.off), p.params, now)
}

func (p *path) below(t bucket.Tick) {
	if !p.hasHi || t.Cmp(p.hi) < 0 {
		p.hi, p.hasHi = t, true
	}
}

func (p *path) above(t bucket.Tick) {
	if !p.hasLo || t.Cmp(p.lo) > 0 {
		p.lo, p.hasLo = t, true
	}
}

func (p *path) belowT(v int64) {
	if !p.hasHiT || v < p.hiT {
		p.hiT, p.hasHiT = v, true
	}
}

func (p *path) aboveT(v int64) {
	if !p.hasLoT || v > p.loT {
		p.loT, p.hasLoT = v, true
	}
}

// pinCover records that the limit covered amount (<= capacity) at now.
func (p *path) pinCover(now, amount int64) {
	switch {
	case p.constant:
	case p.refills():
		p.below(bucket.CoverTick(now, amount, p.params).Sub(p.off))
	default:
		p.aboveT(amount + p.offT)
	}
}

// pinRefusal records that the limit did not cover amount (<= capacity).
func (p *path) pinRefusal(now, amount int64) {
	switch {
	case p.constant:
	case p.refills():
		p.above(bucket.CoverTick(now, amount, p.params).Sub(p.off))
	default:
		p.belowT(amount - 1 + p.offT)
	}
}

// take debits amount > 0 at now.
func (p *path) take(now, amount int64) {
	p.debit += amount
	switch {
	case !p.refills() && p.constant:
		p.kt = bucket.ForceConsume(p.state(now), amount).Tokens
	case !p.refills():
		// An ADD cannot clamp a balance above the capacity.
		p.belowT(p.params.Capacity + p.offT)
		p.offT += amount
	case p.constant:
		at := bucket.TickAt(now, p.params)
		if !p.kFull && p.k.Cmp(at) > 0 {
			at = p.k
		}
		p.k, p.kFull = at.Add(bucket.DebitTicks(amount, p.params)), false
	default:
		at := bucket.TickAt(now, p.params)
		if p.stored.ft.Add(p.off).Cmp(at) <= 0 {
			// Full at now: the debit starts from now, whatever came before.
			p.below(at.Sub(p.off))
			p.constant, p.k = true, at.Add(bucket.DebitTicks(amount, p.params))
			return
		}
		p.above(at.Sub(p.off))
		p.off = p.off.Add(bucket.DebitTicks(amount, p.params))
	}
}

// changed reports whether a write of the batch changes the limit.
func (p *path) changed() bool { return p.rebase || p.debit > 0 }

// simulation is a batch simulated against an image.
type simulation struct {
	img     *image
	paths   []path
	extras  []int // image limits outside the request, in the schema 1 form: converted
	granted []bool
	// at[i] is the time part i is decided at: its own, or the latest
	// before it (the item's rf, an earlier granted part's), as time never
	// runs backwards for a bucket (store.Prepare). Refused parts do not
	// move it: the time of every grant is some grant's own time.
	at []int64
	// observed[i][j] is limit j's state at part i's time, before its debit.
	observed [][]bucket.State
	// stateful: some part's outcome depends on the assumed state (a
	// refusal that is not simply an amount above the capacity, or a
	// grant), so a stale image needs a write or a read to confirm it.
	stateful bool
	events   int64 // granted parts counting an acquire
	first    int64 // the first part's time (rebases happen at it)
	last     int64 // the latest grant's time, at least the item's rf (its rf after the write)
}

// simulate runs the parts of b, in order, against img, deciding each at
// its time (see simulation.at). pinRefusals makes refusals part of the
// paths, for an image that may be stale; on a fresh one a refusal is final
// without a write.
func simulate(img *image, b *batch, pinRefusals bool) *simulation {
	return replay(img, b, pinRefusals, nil, nil)
}

// replay is simulate with the decisions of an earlier simulation of b
// imposed: the parts refused marks are refused without being decided, and
// part i is decided at at[i]. It is how a write's outcome is simulated
// again from the item the write met, which took the write's path.
func replay(img *image, b *batch, pinRefusals bool, refused []bool, at []int64) *simulation {
	sig := b.parts[0].req.Limits
	sim := &simulation{img: img, granted: make([]bool, len(b.parts)), observed: make([][]bucket.State, len(b.parts)),
		at: make([]int64, len(b.parts))}
	latest := int64(math.MinInt64)
	if img.exists {
		latest = img.rf
	}
	timeOf := func(i int) int64 {
		if at != nil {
			return at[i]
		}
		return max(b.parts[i].now, latest)
	}
	sim.first = timeOf(0)
	sim.paths = make([]path, len(sig))
	for j, lr := range sig {
		sim.paths[j] = startPath(img, lr.Name, lr.Params, sim.first)
	}
	for i := range img.limits {
		if l := &img.limits[i]; l.legacy && !hidden(l.name) && findLimit(sig, l.name) < 0 {
			sim.extras = append(sim.extras, i)
		}
	}
	for i, pt := range b.parts {
		now := timeOf(i)
		sim.at[i] = now
		if refused != nil && refused[i] {
			continue
		}
		obs := make([]bucket.State, len(sig))
		refuser := -1
		for j := range sim.paths {
			obs[j] = sim.paths[j].state(now)
			lr := &pt.req.Limits[j]
			if !lr.Check || obs[j].Tokens >= lr.Amount {
				continue
			}
			// Prefer a refusal that holds whatever the state: an amount
			// above the capacity.
			if refuser < 0 || lr.Amount > sim.paths[j].params.Capacity {
				refuser = j
			}
		}
		sim.observed[i] = obs
		if refuser >= 0 {
			if amount := pt.req.Limits[refuser].Amount; amount <= sim.paths[refuser].params.Capacity {
				sim.stateful = true
				if pinRefusals {
					sim.paths[refuser].pinRefusal(now, amount)
				}
			}
			continue
		}
		sim.granted[i], sim.stateful = true, true
		latest = max(latest, now)
		if pt.event && debits(pt.req) {
			sim.events++
		}
		for j := range sim.paths {
			lr := &pt.req.Limits[j]
			if lr.Check {
				sim.paths[j].pinCover(now, lr.Amount)
			}
			if lr.Amount > 0 {
				sim.paths[j].take(now, lr.Amount)
			}
		}
	}
	sim.last = latest
	if latest == math.MinInt64 {
		sim.last = sim.first // nothing granted: nothing to write
	}
	return sim
}

// startPath begins the path of limit name (params as requested) at the
// batch's first time.
func startPath(img *image, name string, params bucket.Params, first int64) path {
	p := path{name: name, params: params}
	i := img.find(name)
	if i < 0 {
		p.rebase, p.constant = true, true
		p.kFull, p.kt = true, params.Capacity
		return p
	}
	p.stored = &img.limits[i]
	if p.stored.params == params && !p.stored.legacy && (p.refills() || p.stored.tk <= params.Capacity) {
		return p
	}
	st := bucket.Reconfigure(img.stateAt(p.stored, first), p.stored.params, params)
	p.rebase, p.constant = true, true
	if p.refills() {
		p.k = bucket.FullTick(st, params, first)
	} else {
		p.kt = st.Tokens
	}
	return p
}

func findLimit(ls []store.LimitRequest, name string) int {
	for i := range ls {
		if ls[i].Name == name {
			return i
		}
	}
	return -1
}

// debited reports whether the simulation debits anything.
func (sim *simulation) debited() bool {
	for i := range sim.paths {
		if sim.paths[i].debit > 0 {
			return true
		}
	}
	return false
}

// needsWrite reports whether the batch grants something and changes the
// item: it debits, it creates the item or rebases a limit (parameters
// adopted, docs/semantics.md 7), or it refills it to a later time than its rf
// (store.Consume brings every bucket to the request's time; with a full
// tick, that moves rf only). A batch that grants nothing writes nothing.
func (sim *simulation) needsWrite() bool {
	if !slices.Contains(sim.granted, true) {
		return false
	}
	if !sim.img.exists || sim.debited() || len(sim.extras) > 0 || sim.last > sim.img.rf {
		return true
	}
	for i := range sim.paths {
		if sim.paths[i].rebase {
			return true
		}
	}
	return false
}

// after returns the image the item has once the write of sim is applied to
// img (the stored item the write met, which took the simulated path).
// The meter and ttl are the caller's.
func (sim *simulation) after(img *image) *image {
	out := img.clone()
	out.exists = true
	out.rf = sim.last
	for j := range sim.paths {
		p := &sim.paths[j]
		if !p.changed() {
			continue
		}
		l := imageLimit{name: p.name, params: p.params}
		switch {
		case !p.refills() && p.constant:
			l.tk = p.kt
		case !p.refills():
			l.tk = bucket.ForceConsume(bucket.State{Tokens: p.stored.tk}, p.offT).Tokens
		case p.constant:
			l.ft = p.finalTick(sim.first)
		default:
			l.ft = p.stored.ft.Add(p.off)
		}
		if i := out.find(p.name); i >= 0 {
			out.limits[i] = l
		} else {
			out.limits = append(out.limits, l)
		}
	}
	for _, i := range sim.extras {
		l := &out.limits[i]
		l.ft, l.tk, l.rm, l.legacy = img.fullTick(&img.limits[i]), 0, 0, false
	}
	return out
}

// finalTick returns the full tick a constant refilling path sets: its
// constant, or full at the batch's first time if never debited.
func (p *path) finalTick(first int64) bucket.Tick {
	if p.kFull {
		return bucket.TickAt(first, p.params)
	}
	return p.k
}

func debits(br *store.BucketRequest) bool {
	for i := range br.Limits {
		if br.Limits[i].Amount > 0 {
			return true
		}
	}
	return false
}
