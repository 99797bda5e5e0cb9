package dynamodb

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

// expr accumulates an update and a condition expression with placeholders
// for every attribute name (many, like "ttl", are reserved words) and value.
//
// A warm acquire builds one for every write, so it is built with few
// allocations: placeholders of the first placeholderCache names and values
// are shared constants, the names are found again by a linear search of the
// few an expression has, and each clause is one concatenation.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
	attrs  []string // attrs[i] has the placeholder namePlaceholder(i)
	set    []string
	add    []string
	remove []string
	cond   []string
}

// exprSize is what an expression is sized for up front: a one-limit
// acquire's write names 9 attributes and 10 values, in 5 conditions and 5
// updates.
const exprSize = 12

func newExpr() *expr {
	return &expr{
		names:  make(map[string]string, exprSize),
		values: make(map[string]types.AttributeValue, exprSize),
		attrs:  make([]string, 0, exprSize),
		set:    make([]string, 0, exprSize/2),
		cond:   make([]string, 0, exprSize/2),
	}
}

// placeholderCache is how many name and value placeholders are shared
// constants.
const placeholderCache = 64

var namePlaceholders, valuePlaceholders = placeholders("#n"), placeholders(":v")

func placeholders(prefix string) [placeholderCache]string {
	var ps [placeholderCache]string
	for i := range ps {
		ps[i] = prefix + strconv.Itoa(i)
	}
	return ps
}

func placeholder(cached *[placeholderCache]string, prefix string, i int) string {
	if i < placeholderCache {
		return cached[i]
	}
	return prefix + strconv.Itoa(i)
}

func (e *expr) name(attr string) string {
	for i, a := range e.attrs {
		if a == attr {
			return placeholder(&namePlaceholders, "#n", i)
		}
	}
	p := placeholder(&namePlaceholders, "#n", len(e.attrs))
	e.attrs = append(e.attrs, attr)
	e.names[p] = attr
	return p
}

func (e *expr) value(v types.AttributeValue) string {
	p := placeholder(&valuePlaceholders, ":v", len(e.values))
	e.values[p] = v
	return p
}

func (e *expr) setN(attr string, v int64) { e.setV(attr, num(v)) }
func (e *expr) setV(attr string, v types.AttributeValue) {
	e.set = append(e.set, e.name(attr)+" = "+e.value(v))
}
func (e *expr) addN(attr string, v int64) { e.add = append(e.add, e.name(attr)+" "+e.value(num(v))) }

// where adds a condition; in it, %s stands for the attribute and %v for the
// value, e.g. e.where("%s >= %v", attr, num(5)).
func (e *expr) where(format, attr string, v types.AttributeValue) {
	before, after, _ := strings.Cut(format, "%s")
	n := e.name(attr)
	if v == nil {
		e.cond = append(e.cond, before+n+after)
		return
	}
	mid, end, _ := strings.Cut(after, "%v")
	e.cond = append(e.cond, before+n+mid+e.value(v)+end)
}

func (e *expr) update() *string {
	if len(e.set)+len(e.add)+len(e.remove) == 0 {
		return nil
	}
	var sb strings.Builder
	n := 0
	for _, l := range [][]string{e.set, e.add, e.remove} {
		for _, c := range l {
			n += len(c) + 2
		}
	}
	sb.Grow(n + len("SET ADD REMOVE "))
	for _, part := range []struct {
		verb    string
		clauses []string
	}{{"SET ", e.set}, {"ADD ", e.add}, {"REMOVE ", e.remove}} {
		if len(part.clauses) == 0 {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(part.verb)
		for j, c := range part.clauses {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(c)
		}
	}
	s := sb.String()
	return &s
}

func (e *expr) condition() *string {
	if len(e.cond) == 0 {
		return nil
	}
	s := strings.Join(e.cond, " AND ")
	return &s
}

func (e *expr) attrValues() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// updateItem returns the UpdateItem of the item at key in table that e
// describes. With ret set, a write that succeeds returns the item as ret
// says, and one whose condition fails returns the item as it was
// (ALL_OLD): every caller that reads a result plans its next write from
// the item either way.
func (e *expr) updateItem(table *string, key item, ret types.ReturnValue) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                 table,
		Key:                       key,
		UpdateExpression:          e.update(),
		ConditionExpression:       e.condition(),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.attrValues(),
	}
	if ret != "" {
		in.ReturnValues = ret
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return in
}

// transactUpdate turns an UpdateItem into a transaction item; one that
// updates nothing becomes a check of its condition, which the transaction
// still depends on.
func transactUpdate(u *dynamodb.UpdateItemInput) types.TransactWriteItem {
	if u.UpdateExpression == nil {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		}}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	}}
}

// updateExpr adds to e the update of an existing item (its condition
// alone unless update).
func (en *engine) updateExpr(e *expr, b *batch, img *image, sim *simulation, w *write, update bool) {
	pinned := false
	for j := range sim.paths {
		pinned = en.pathExpr(e, &sim.paths[j], sim.first, update) || pinned
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
	w.ttl = en.ttlExpr(e, img, sim)
	redescribeEntity(e, img, b.parts[0].req.Entity)
}

// pathExpr adds one limit's path to e: its condition (the parameters and
// the interval, or the exact stored value of a rebase) and, if update, its
// update. It reports whether the condition names an attribute of the
// stored item.
func (en *engine) pathExpr(e *expr, p *path, first int64, update bool) bool {
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

// whereParams conditions e on the stored parameters of limit name being
// p. A calendar quota's period is stored as 0, which no other refilling
// limit has: a rate limit's condition never matches a quota's item, and
// a quota's names its window too.
func whereParams(e *expr, name string, p bucket.Params) {
	e.where("%s = %v", limitAttr(name, fieldCapacity), num(p.Capacity))
	e.where("%s = %v", limitAttr(name, fieldAmount), num(p.Amount))
	e.where("%s = %v", limitAttr(name, fieldPeriod), num(storedPeriod(p)))
	if !p.Window.IsZero() {
		e.where("%s = %v", limitAttr(name, fieldWindow), str(p.Window.String()))
	}
}

// setParams stores p as limit name's parameters, its window (or none).
func setParams(e *expr, name string, p bucket.Params) {
	e.setN(limitAttr(name, fieldCapacity), p.Capacity)
	e.setN(limitAttr(name, fieldAmount), p.Amount)
	e.setN(limitAttr(name, fieldPeriod), storedPeriod(p))
	if p.Window.IsZero() {
		e.remove = append(e.remove, e.name(limitAttr(name, fieldWindow)))
	} else {
		e.setV(limitAttr(name, fieldWindow), str(p.Window.String()))
	}
}

// storedPeriod is the refill period stored for p: 0 for a calendar quota
// (whose period is one window of its fieldWindow).
func storedPeriod(p bucket.Params) int64 {
	if !p.Window.IsZero() {
		return 0
	}
	return p.Period
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

// redescribeEntity adds to e the update of a stored bucket item's parent
// and cascade flag, where they differ from what the caller knows (an entity
// created after its first acquire, or an item written before they were
// kept). An item not known (a guessed image) is left as it is.
func redescribeEntity(e *expr, img *image, ent *model.Entity) {
	if ent == nil || img.guessed {
		return
	}
	if !img.hasCascade || img.cascade != ent.Cascade {
		e.setV(attrCascade, boolean(ent.Cascade))
	}
	if img.parent != ent.ParentID {
		if ent.ParentID == "" {
			e.remove = append(e.remove, e.name(attrParent))
		} else {
			e.setV(attrParent, str(ent.ParentID))
		}
	}
}
