package dynamodb

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// An image is one bucket item as this process last saw it: returned by a
// write (ALL_OLD, with the write applied), by a failed write (ALL_OLD), or
// read. Writes are planned from it (plan.go) and conditioned on what they
// assume of it, so a stale image costs a failed write, never exactness.
//
// A refilling limit is stored as its full tick (bucket.FullTick, attribute
// b_{limit}_ft), which does not move with time; a concurrency limit as its
// balance (b_{limit}_tk). Items written before full ticks (schema 1) hold a
// refilling limit as its balance and remainder at the item's refill time
// rf (tk, rm); such a legacy limit is read as it always was, and the next
// write that plans from it converts every legacy limit of the item.
type image struct {
	exists  bool // false: the item does not exist (the rest is zero)
	guessed bool // assumed of an item not known, not seen (serve)
	shards  int  // shard_count, 1 if absent
	rf      int64
	ttl     int64 // 0 with hasTTL false: the item has none (schema 1 items)
	hasTTL  bool
	limits  []imageLimit

	// The entity's parent and cascade flag, as the item describes them.
	parent     string
	cascade    bool
	hasCascade bool
}

// imageLimit is one limit of an image.
type imageLimit struct {
	name   string
	params bucket.Params
	ft     bucket.Tick // refilling limits (params.Amount > 0), unless legacy
	tk     int64       // concurrency limits, and legacy refilling limits
	rm     int64       // legacy refilling limits
	legacy bool
}

func (l *imageLimit) refills() bool { return l.params.Refills() }

// find returns the index of the named limit, or -1.
func (img *image) find(name string) int {
	for i := range img.limits {
		if img.limits[i].name == name {
			return i
		}
	}
	return -1
}

// stateAt returns limit l of img at now: refilled, clamped to capacity.
func (img *image) stateAt(l *imageLimit, now int64) bucket.State {
	switch {
	case !l.refills():
		return bucket.Refill(bucket.State{Tokens: l.tk}, l.params, 0)
	case l.legacy:
		return bucket.RefillBetween(bucket.State{Tokens: l.tk, Rem: l.rm}, l.params, img.rf, now)
	}
	return bucket.AtTick(l.ft, l.params, now)
}

// fullTick returns a refilling limit's full tick, converting a legacy one
// (exactly: the legacy state is the balance at rf).
func (img *image) fullTick(l *imageLimit) bucket.Tick {
	if l.legacy {
		return bucket.FullTick(bucket.State{Tokens: l.tk, Rem: l.rm}, l.params, img.rf)
	}
	return l.ft
}

// legacy reports whether some limit of img is in the schema 1 form.
func (img *image) legacy() bool {
	for i := range img.limits {
		if img.limits[i].legacy {
			return true
		}
	}
	return false
}

// record returns img as a store.Record at `at`: every limit refilled to
// at. Any at works for callers that refill further to their own now >= at
// (store.Prepare): the item's rf is the usual choice.
func (img *image) record(at int64) *store.Record {
	rec := &store.Record{Refilled: at, Limits: make([]store.LimitState, len(img.limits))}
	for i := range img.limits {
		l := &img.limits[i]
		rec.Limits[i] = store.LimitState{Name: l.name, Params: l.params, State: img.stateAt(l, at)}
	}
	return rec
}

// clone returns a deep copy of img.
func (img *image) clone() *image {
	c := *img
	c.limits = append([]imageLimit(nil), img.limits...)
	return &c
}

// Image reads attributes of an image of a bucket item: strings and
// numbers, as decimal text (the form every DynamoDB stream consumer gets
// them in). The backend reads its items through it (itemAttrs), and the
// stream consumer (package stream) hands it the images of stream records
// (SplitDue).
type Image interface {
	S(name string) string
	N(name string) string
	Names() []string
}

// itemImage reads a bucket item of the DynamoDB API (nil: absent).
func itemImage(it item) (*image, error) {
	if it == nil {
		return &image{shards: 1}, nil
	}
	img, err := decodeImage(itemAttrs(it))
	if err != nil {
		return nil, err
	}
	img.parent = getS(it, attrParent)
	_, img.hasCascade = it[attrCascade]
	img.cascade = getBool(it, attrCascade)
	return img, nil
}

// decodeImage reads a bucket item's limits, shard count, rf and ttl from
// any image of it (an item of the API, or a stream record's image). A
// limit is found by its capacity attribute; one with a partial set of
// attributes is an error.
func decodeImage(a Image) (*image, error) {
	img := &image{exists: true, shards: 1}
	if v := a.N(attrShardCount); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 1 {
			img.shards = n
		}
	}
	var err error
	if v := a.N(attrRefilled); v != "" {
		if img.rf, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("dynamodb: attribute %s: %w", attrRefilled, err)
		}
	}
	if v := a.N(attrTTL); v != "" {
		if img.ttl, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("dynamodb: attribute %s: %w", attrTTL, err)
		}
		img.hasTTL = true
	}
	suffix := "_" + fieldCapacity
	limit := func(name string) error {
		if !strings.HasPrefix(name, "b_") || !strings.HasSuffix(name, suffix) {
			return nil
		}
		l, err := decodeLimit(a, name[2:len(name)-len(suffix)])
		if err != nil {
			return err
		}
		if l.legacy && a.N(attrRefilled) == "" {
			return fmt.Errorf("dynamodb: limit %s is stored as a balance, and the item has no %s", l.name, attrRefilled)
		}
		img.limits = append(img.limits, l)
		return nil
	}
	if m, ok := a.(itemAttrs); ok { // the item of every write: no list of its names
		for name := range m {
			if err := limit(name); err != nil {
				return nil, err
			}
		}
		return img, nil
	}
	for _, name := range a.Names() {
		if err := limit(name); err != nil {
			return nil, err
		}
	}
	return img, nil
}

func decodeLimit(a Image, name string) (imageLimit, error) {
	l := imageLimit{name: name}
	m, isItem := a.(itemAttrs)
	var buf [64]byte
	// n returns the number attribute of the limit's field: of an item of
	// the API looked up without building its name (a map index by a
	// []byte conversion does not allocate).
	n := func(field string) string {
		if !isItem {
			return a.N(limitAttr(name, field))
		}
		k := append(append(append(append(buf[:0], "b_"...), name...), '_'), field...)
		if v, ok := m[string(k)].(*types.AttributeValueMemberN); ok {
			return v.Value
		}
		return ""
	}
	num := func(field string, v *int64) error {
		s := n(field)
		if s == "" {
			return fmt.Errorf("dynamodb: attribute %s missing or not a number", limitAttr(name, field))
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("dynamodb: attribute %s: %w", limitAttr(name, field), err)
		}
		*v = i
		return nil
	}
	for _, f := range []struct {
		field string
		v     *int64
	}{{fieldCapacity, &l.params.Capacity}, {fieldAmount, &l.params.Amount}, {fieldPeriod, &l.params.Period}} {
		if err := num(f.field, f.v); err != nil {
			return l, err
		}
	}
	if l.params.Period == 0 && l.params.Amount > 0 { // a calendar quota (storedPeriod)
		attr := limitAttr(name, fieldWindow)
		w, err := calendar.Parse(a.S(attr))
		if err != nil {
			return l, fmt.Errorf("dynamodb: attribute %s: %q: %w", attr, a.S(attr), err)
		}
		l.params.Period, l.params.Window = 1, w
	}
	if err := l.params.Validate(); err != nil {
		return l, fmt.Errorf("dynamodb: limit %s: %w", name, err)
	}
	if !l.refills() {
		return l, num(fieldTokens, &l.tk)
	}
	if s := n(fieldFullTick); s != "" {
		ft, err := bucket.ParseTick(s)
		if err != nil {
			return l, fmt.Errorf("dynamodb: attribute %s: %w", limitAttr(name, fieldFullTick), err)
		}
		l.ft = ft
		return l, nil
	}
	l.legacy = true
	if err := num(fieldTokens, &l.tk); err != nil {
		return l, err
	}
	return l, num(fieldRem, &l.rm)
}

// itemAttrs adapts an item of the DynamoDB API to Image.
type itemAttrs item

func (m itemAttrs) S(name string) string { return getS(item(m), name) }

func (m itemAttrs) N(name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func (m itemAttrs) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// tickValue is a full tick as a DynamoDB number.
func tickValue(t bucket.Tick) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: t.String()}
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
		attrGSI4PK:     str(namespaceIndexPK(id.ns, bucketPK(id.ns, id.key, id.shard), skState)),
		attrGSI4SK:     str(bucketPK(id.ns, id.key, id.shard)),
	}
	for _, l := range img.limits {
		it[limitAttr(l.name, fieldCapacity)] = num(l.params.Capacity)
		it[limitAttr(l.name, fieldAmount)] = num(l.params.Amount)
		it[limitAttr(l.name, fieldPeriod)] = num(storedPeriod(l.params))
		if !l.params.Window.IsZero() {
			it[limitAttr(l.name, fieldWindow)] = str(l.params.Window.String())
		}
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

func itoa(n int) string { return strconv.Itoa(n) }

// describeEntity adds e's parent and cascade flag to a bucket item being
// created.
func describeEntity(it item, e *model.Entity) {
	if e == nil {
		return
	}
	it[attrCascade] = boolean(e.Cascade)
	if e.ParentID != "" {
		it[attrParent] = str(e.ParentID)
	}
}
