package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
)

// write is one planned write of a batch: an update of an existing item or
// the creation of a missing one, and what it does to the item's meter and
// ttl (applied to the stored item it meets, to know the item after it).
type write struct {
	sim    *simulation
	update *dynamodb.UpdateItemInput
	put    *dynamodb.PutItemInput
	meter  meterOp
	ttl    ttlOp
}

// meterOp is what a write does to the item's write-pressure meter.
type meterOp struct {
	on  bool
	add bool        // ADD v (ticks); else SET v
	v   bucket.Tick // ticks added, or the full tick set
	p   bucket.Params
}

// ttlOp is what a write does to the item's ttl.
type ttlOp struct {
	set, add bool
	v        int64
}

func (o ttlOp) apply(img *image) {
	switch {
	case o.set:
		img.ttl, img.hasTTL = o.v, true
	case o.add:
		img.ttl += o.v
	}
}

func (o meterOp) apply(img *image, pm bucket.Params) {
	if !o.on {
		return
	}
	i := img.find(pressureLimit)
	if o.add {
		if i >= 0 && img.limits[i].params == pm && !img.limits[i].legacy {
			img.limits[i].ft = img.limits[i].ft.Add(o.v)
		} else if i >= 0 {
			img.limits = append(img.limits[:i], img.limits[i+1:]...) // not known: the next write sets it
		}
		return
	}
	l := imageLimit{name: pressureLimit, params: pm, ft: o.v}
	if i >= 0 {
		img.limits[i] = l
	} else {
		img.limits = append(img.limits, l)
	}
}

// meterOp plans the meter's part of a write made at `at` (a write that
// debits nothing is not metered). The meter measures, it decides nothing:
// it is written without condition, as an ADD when the image shows it not
// full at `at`, else SET afresh. A stale image can make it undercount a
// little (an ADD the full meter absorbs, a SET over another writer's
// count), which only delays a split; this process's own writes to an item
// go one at a time, from the image the previous one returned.
func (s *Store) meterOp(img *image, at int64, debits bool) meterOp {
	if s.writesPerSecond == 0 || !debits {
		return meterOp{}
	}
	pm := s.pressureParams()
	cost := bucket.DebitTicks(writeCost, pm)
	now := bucket.TickAt(at, pm)
	if i := img.find(pressureLimit); i >= 0 {
		if l := &img.limits[i]; l.params == pm && !l.legacy && l.ft.Cmp(now) > 0 {
			return meterOp{on: true, add: true, v: cost, p: pm}
		}
	}
	return meterOp{on: true, v: now.Add(cost), p: pm}
}

// pressured reports whether the meter of img (after a write at `at`) is in
// debt: the item takes more writes than the pressure limit.
func (s *Store) pressured(img *image, at int64) bool {
	if s.writesPerSecond == 0 {
		return false
	}
	i := img.find(pressureLimit)
	if i < 0 || img.limits[i].legacy {
		return false
	}
	return img.stateAt(&img.limits[i], at).Tokens < 0
}

// planWrite builds the write of a simulated batch: an update, or the
// creation of a missing item. A batch that needs no write gets the
// condition alone (a transaction's condition check).
func (s *Store) planWrite(b *batch, img *image, sim *simulation) *write {
	update := sim.needsWrite()
	w := &write{sim: sim, meter: s.meterOp(img, sim.last, sim.debited())}
	if !img.exists {
		after := sim.after(img)
		after.shards = b.parts[0].shards
		w.meter.apply(after, w.meter.p)
		after.ttl, after.hasTTL = s.expiry(after), true
		w.ttl = ttlOp{set: true, v: after.ttl}
		it := encodeItem(b.id, after, sim)
		describeEntity(it, b.parts[0].req.Entity)
		w.put = &dynamodb.PutItemInput{
			TableName: &s.table, Item: it,
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		return w
	}
	e := newExpr()
	s.updateExpr(e, b, img, sim, w, update)
	w.update = e.updateItem(&s.table, shardKey(b.id.ns, b.id.key, b.id.shard), types.ReturnValueAllOld)
	return w
}

// updateExpr adds to e the update of an existing item (its condition
// alone unless update).
func (s *Store) updateExpr(e *expr, b *batch, img *image, sim *simulation, w *write, update bool) {
	pinned := false
	for j := range sim.paths {
		pinned = s.pathExpr(e, &sim.paths[j], sim.first, update) || pinned
	}
	legacy := len(sim.extras) > 0
	for j := range sim.paths {
		legacy = legacy || sim.paths[j].stored != nil && sim.paths[j].stored.legacy
	}
	for _, i := range sim.extras {
		l := &img.limits[i]
		whereLegacy(e, l)
		if update {
			e.setV(limitAttr(l.name, fieldFullTick), tickValue(img.fullTick(l)))
			removeLegacy(e, l.name)
		}
		pinned = true
	}
	if legacy {
		e.where("%s = %v", attrRefilled, num(img.rf))
	}
	if !pinned {
		e.where("attribute_exists(%s)", attrPK, nil)
	}
	if !update {
		return
	}
	if legacy {
		e.remove = append(e.remove, e.name(attrVersion))
	}
	meterExpr(e, w.meter, img)
	e.setN(attrRefilled, sim.last)
	if sim.events > 0 {
		e.addN(attrEvents, sim.events)
	}
	w.ttl = s.ttlExpr(e, img, sim)
	redescribeEntity(e, img, b.parts[0].req.Entity)
}

// pathExpr adds one limit's path to e: its condition (the parameters and
// the interval, or the exact stored value of a rebase) and, if update, its
// update. It reports whether the condition names an attribute of the
// stored item.
func (s *Store) pathExpr(e *expr, p *path, first int64, update bool) bool {
	tk, ft := limitAttr(p.name, fieldTokens), limitAttr(p.name, fieldFullTick)
	pinned := false
	switch {
	case p.rebase && p.stored == nil:
		e.where("attribute_not_exists(%s)", limitAttr(p.name, fieldCapacity), nil)
	case p.rebase:
		whereParams(e, p.name, p.stored.params)
		switch {
		case p.stored.legacy:
			whereLegacy(e, p.stored)
		case p.stored.refills():
			e.where("%s = %v", ft, tickValue(p.stored.ft))
		default:
			e.where("%s = %v", tk, num(p.stored.tk))
		}
		pinned = true
	case p.hasLo || p.hasHi || p.hasLoT || p.hasHiT || p.debit > 0:
		whereParams(e, p.name, p.params)
		if p.refills() {
			whereTicks(e, ft, p.lo, p.hasLo, p.hi, p.hasHi)
		} else {
			whereRange(e, tk, p.loT, p.hasLoT, p.hiT, p.hasHiT)
		}
		pinned = true
	}
	if !update {
		return pinned
	}
	switch {
	case p.rebase:
		if p.refills() {
			e.setV(ft, tickValue(p.finalTick(first)))
		} else {
			e.setN(tk, p.kt)
		}
		if p.stored == nil || p.stored.params != p.params {
			setParams(e, p.name, p.params)
		}
		switch {
		case p.stored == nil:
		case p.stored.legacy && !p.refills():
			e.remove = append(e.remove, e.name(limitAttr(p.name, fieldRem)), e.name(limitAttr(p.name, fieldFullAt)))
		case p.stored.legacy:
			removeLegacy(e, p.name)
		case p.stored.refills() && !p.refills():
			e.remove = append(e.remove, e.name(ft))
		case !p.stored.refills() && p.refills():
			e.remove = append(e.remove, e.name(tk))
		}
	case p.constant:
		e.setV(ft, tickValue(p.k))
	case p.refills() && p.off.Sign() != 0:
		e.add = append(e.add, e.name(ft)+" "+e.value(tickValue(p.off)))
	case !p.refills() && p.offT != 0:
		e.addN(tk, -p.offT)
	}
	if p.debit > 0 {
		e.addN(limitAttr(p.name, fieldConsumed), p.debit)
	}
	return pinned
}

func whereParams(e *expr, name string, p bucket.Params) {
	e.where("%s = %v", limitAttr(name, fieldCapacity), num(p.Capacity))
	e.where("%s = %v", limitAttr(name, fieldAmount), num(p.Amount))
	e.where("%s = %v", limitAttr(name, fieldPeriod), num(p.Period))
}

func setParams(e *expr, name string, p bucket.Params) {
	e.setN(limitAttr(name, fieldCapacity), p.Capacity)
	e.setN(limitAttr(name, fieldAmount), p.Amount)
	e.setN(limitAttr(name, fieldPeriod), p.Period)
}

// whereLegacy pins a schema 1 limit to its stored balance and remainder.
func whereLegacy(e *expr, l *imageLimit) {
	e.where("%s = %v", limitAttr(l.name, fieldTokens), num(l.tk))
	e.where("%s = %v", limitAttr(l.name, fieldRem), num(l.rm))
}

// removeLegacy removes a converted limit's schema 1 attributes.
func removeLegacy(e *expr, name string) {
	for _, f := range []string{fieldTokens, fieldRem, fieldFullAt} {
		e.remove = append(e.remove, e.name(limitAttr(name, f)))
	}
}

// whereTicks conditions attr on lo < value <= hi (each bound if present).
func whereTicks(e *expr, attr string, lo bucket.Tick, hasLo bool, hi bucket.Tick, hasHi bool) {
	switch {
	case hasLo && hasHi:
		n := e.name(attr)
		e.cond = append(e.cond, n+" BETWEEN "+e.value(tickValue(lo.Add(bucket.TickOf(1))))+" AND "+e.value(tickValue(hi)))
	case hasLo:
		e.where("%s > %v", attr, tickValue(lo))
	case hasHi:
		e.where("%s <= %v", attr, tickValue(hi))
	}
}

// whereRange conditions attr on lo <= value <= hi (each bound if present).
func whereRange(e *expr, attr string, lo int64, hasLo bool, hi int64, hasHi bool) {
	switch {
	case hasLo && hasHi:
		n := e.name(attr)
		e.cond = append(e.cond, n+" BETWEEN "+e.value(num(lo))+" AND "+e.value(num(hi)))
	case hasLo:
		e.where("%s >= %v", attr, num(lo))
	case hasHi:
		e.where("%s <= %v", attr, num(hi))
	}
}

// meterExpr adds the meter's update (no condition).
func meterExpr(e *expr, m meterOp, img *image) {
	if !m.on {
		return
	}
	ft := limitAttr(pressureLimit, fieldFullTick)
	if m.add {
		e.add = append(e.add, e.name(ft)+" "+e.value(tickValue(m.v)))
		return
	}
	e.setV(ft, tickValue(m.v))
	i := img.find(pressureLimit)
	if i < 0 || img.limits[i].params != m.p {
		setParams(e, pressureLimit, m.p)
	}
	if i >= 0 && img.limits[i].legacy {
		e.remove = append(e.remove, e.name(limitAttr(pressureLimit, fieldTokens)), e.name(limitAttr(pressureLimit, fieldRem)))
	}
}

// encodeItem builds a whole bucket item: the image img of item id, with
// the simulation's debits as its consumed counters and its acquires.
func encodeItem(id itemID, img *image, sim *simulation) item {
	it := item{
		attrPK:         str(bucketPK(id.ns, id.key, id.shard)),
		attrSK:         str(skState),
		attrEntity:     str(id.key.Entity),
		attrResource:   str(id.key.Resource),
		attrShard:      num(int64(id.shard)),
		attrShardCount: num(int64(img.shards)),
		attrRefilled:   num(img.rf),
		attrTTL:        num(img.ttl),
		attrGSI2PK:     str(resourcePK(id.ns, id.key.Resource)),
		attrGSI2SK:     str("BUCKET#" + id.key.Entity + "#" + itoa(id.shard)),
		attrGSI3PK:     str(entityPK(id.ns, id.key.Entity)),
		attrGSI3SK:     str("BUCKET#" + id.key.Resource + "#" + itoa(id.shard)),
		attrGSI4PK:     str(id.ns),
		attrGSI4SK:     str(bucketPK(id.ns, id.key, id.shard)),
	}
	for _, l := range img.limits {
		it[limitAttr(l.name, fieldCapacity)] = num(l.params.Capacity)
		it[limitAttr(l.name, fieldAmount)] = num(l.params.Amount)
		it[limitAttr(l.name, fieldPeriod)] = num(l.params.Period)
		if l.refills() {
			it[limitAttr(l.name, fieldFullTick)] = tickValue(l.ft)
		} else {
			it[limitAttr(l.name, fieldTokens)] = num(l.tk)
		}
		if !hidden(l.name) {
			it[limitAttr(l.name, fieldConsumed)] = num(0)
		}
	}
	if sim != nil {
		for j := range sim.paths {
			it[limitAttr(sim.paths[j].name, fieldConsumed)] = num(sim.paths[j].debit)
		}
		if sim.events > 0 {
			it[attrEvents] = num(sim.events)
		}
	}
	return it
}

// serve decides and writes one batch, starting from img (the lane's image;
// nil: not known), hands every part its outcome, and returns the image the
// item has after it (nil when unknown).
//
// With speculation on, the first write is planned from img, or, for an
// item not known, from a guess that it exists and is full; a stale image
// costs one failed write, which returns the item to plan again from. With
// speculation off, every batch starts from a consistent read. A batch whose
// parts the image refuses is confirmed by a read, unless the image is
// fresh (a moment old: the item a failed write returned, or a read).
func (s *Store) serve(ctx context.Context, b *batch, img *image) *image {
	fresh := false
	if !s.speculative {
		img = nil
	}
	for {
		if img == nil && !s.speculative {
			var err error
			if img, err = s.readImage(ctx, b.id); err != nil {
				s.failAll(b, err)
				return nil
			}
			fresh = true
		}
		assumed := img
		if assumed == nil {
			assumed = guess(b)
		}
		if !s.layoutOK(b, assumed) {
			return img
		}
		sim := simulate(assumed, b, !fresh)
		if !sim.needsWrite() {
			if fresh || !sim.stateful {
				s.decide(b, sim, false)
				return img
			}
			var err error
			if img, err = s.readImage(ctx, b.id); err != nil {
				s.failAll(b, err)
				return nil
			}
			fresh = true
			continue
		}
		w := s.planWrite(b, assumed, sim)
		old, ok, err := s.send(ctx, b, w)
		switch {
		case err != nil:
			s.failAll(b, err)
			return nil
		case ok:
			return s.applied(b, w, old)
		}
		// The write lost: old is the item it met. Plan again from it.
		img, fresh = old, true
		if !s.retryBatch(ctx, b) {
			return img
		}
	}
}

// guess is the image assumed of an item not known: it exists, every
// limit of the batch with the batch's parameters, full since before the
// batch's first time.
func guess(b *batch) *image {
	first := b.parts[0].now
	for _, p := range b.parts {
		first = min(first, p.now)
	}
	img := &image{exists: true, guessed: true, shards: b.parts[0].shards, rf: first}
	for _, lr := range b.parts[0].req.Limits {
		l := imageLimit{name: lr.Name, params: lr.Params, tk: lr.Params.Capacity}
		if l.refills() {
			l.ft = bucket.TickAt(first, lr.Params)
		}
		img.limits = append(img.limits, l)
	}
	return img
}

// layoutOK checks that the batch was planned for the item's layout (its
// shard count, and a missing item only where a new bucket is created). If
// not, it corrects the cached shard count and hands every part errReplan.
func (s *Store) layoutOK(b *batch, img *image) bool {
	n := b.parts[0].shards
	bid := bucketID{b.id.ns, b.id.key}
	switch {
	case img.exists && img.shards != n:
		s.shardCounts.store(bid, img.shards)
	case !img.exists && (b.id.shard != 0 || n != 1):
		s.shardCounts.forget(bid)
	default:
		return true
	}
	s.failAll(b, errReplan)
	return false
}

// send makes the write. ok reports that it was applied, and old is then
// the item it met (absent for a creation); a failed condition returns the
// item that failed it (absent if there is none).
func (s *Store) send(ctx context.Context, b *batch, w *write) (old *image, ok bool, err error) {
	var attrs item
	if w.put != nil {
		_, err = s.db.PutItem(ctx, w.put)
	} else {
		var out *dynamodb.UpdateItemOutput
		if out, err = s.db.UpdateItem(ctx, w.update); err == nil {
			attrs = out.Attributes
		}
	}
	var cond *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cond):
		attrs = cond.Item
	case err != nil:
		return nil, false, fmt.Errorf("dynamodb: write bucket %s/%s: %w", b.id.key.Entity, b.id.key.Resource, err)
	default:
		ok = true
	}
	old, err = itemImage(attrs)
	return old, ok, err
}

// applied finishes a batch whose write was applied to old: the outcomes
// are those of the simulation from old, which took the path the write was
// conditioned on (so it grants the same parts), and the item is old with
// the write applied.
func (s *Store) applied(b *batch, w *write, old *image) *image {
	sim := w.sim
	if old.exists {
		refused := make([]bool, len(b.parts))
		for i, g := range w.sim.granted {
			refused[i] = !g
		}
		sim = replay(old, b, false, refused, w.sim.at)
		for i := range sim.granted {
			if sim.granted[i] != w.sim.granted[i] {
				s.failAll(b, fmt.Errorf("dynamodb: bucket %s/%s: the write's outcome differs from its plan (a bug)", b.id.key.Entity, b.id.key.Resource))
				return nil
			}
			if !sim.granted[i] {
				sim.observed[i] = w.sim.observed[i] // what it was refused on
			}
		}
	}
	after := sim.after(old)
	if !old.exists {
		after.shards = b.parts[0].shards
	}
	w.meter.apply(after, w.meter.p)
	w.ttl.apply(after)
	s.decide(b, sim, s.pressured(after, sim.last))
	return after
}

// decide hands every part of b its outcome from sim.
func (s *Store) decide(b *batch, sim *simulation, pressured bool) {
	for i, p := range b.parts {
		s.finish(b.id, p, outcome{granted: sim.granted[i], pressured: pressured && sim.granted[i], observed: sim.observed[i]})
	}
}

// failAll hands every part of b the error err.
func (s *Store) failAll(b *batch, err error) {
	for _, p := range b.parts {
		s.finish(b.id, p, outcome{err: err})
	}
}

// retryBatch charges every part of b a retry after a lost race. Parts
// whose operation has spent its budget fail with ErrContention; the rest
// wait the longest backoff any of them asks for. It reports whether any
// part is left.
func (s *Store) retryBatch(ctx context.Context, b *batch) bool {
	kept := b.parts[:0]
	var wait time.Duration
	for _, p := range b.parts {
		d, err := p.budget.charge(errLostRace)
		if err != nil {
			s.finish(b.id, p, outcome{err: p.budget.giveUp(err, "bucket "+b.id.key.Entity+"/"+b.id.key.Resource)})
			continue
		}
		wait = max(wait, d)
		kept = append(kept, p)
	}
	b.parts = kept
	if len(kept) > 0 && wait > 0 {
		_ = s.sleep(ctx, wait)
	}
	return len(kept) > 0
}

func itoa(n int) string { return strconv.Itoa(n) }
