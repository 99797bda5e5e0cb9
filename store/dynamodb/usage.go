package dynamodb

// Usage snapshots (store.UsageStore; docs/dynamodb.md 2.5, docs/aggregator.md).
//
// One item per snapshot, in its entity's partition:
//
//	PK      {ns}/ENTITY#{entity}
//	SK      #USAGE#{resource}#{window}#{start}        start: Unix ms, %020d
//	GSI2PK  {ns}/RESOURCE#{resource}
//	GSI2SK  USAGE#{window}#{start}#{entity}
//	GSI4PK  {ns}#{part}   GSI4SK  (= PK)
//	entity, resource, window S; window_start, events N; u_{limit} N;
//	exp N (Unix ms) and ttl N (Unix s, rounded up);
//	seq_{source} (or seq~{hash of source}) S per source.
//
// The start is written as store.UsageQuery.UsageCursor writes it, so that
// within one window the sort key orders snapshots exactly as the listing
// does (resource then start on the entity's partition; start then entity on
// GSI2). Cursors then translate into key bounds, and a page is read in
// order without sorting everything first.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

var _ store.UsageStore = (*Store)(nil)

// Usage item attributes (besides the keys, attrEntity, attrResource and
// attrTTL).
const (
	attrUsageWindow = "window"
	attrUsageStart  = "window_start"
	attrUsageEvents = "events"
	// attrUsageExpires is the retention in ms, as given (Expires); ttl holds the
	// same instant in seconds for DynamoDB's TTL, which only knows seconds.
	attrUsageExpires = "exp"

	usageCounterPrefix = "u_"   // u_{limit}: net millitokens
	seqRawPrefix       = "seq_" // seq_{source}: last Seq applied from source
	seqHashPrefix      = "seq~" // seq~{hash of source}, for other sources

	skUsagePrefix   = "#USAGE#"
	gsi2UsagePrefix = "USAGE#"

	// usageWriters bounds the snapshots one AddUsage writes at once.
	usageWriters = 16
	// usageMaxRawSource bounds a source kept verbatim in its attribute name: the
	// name is stored in every item the source writes.
	usageMaxRawSource = 64
)

// usagePadStart writes a window start as the listing cursors do: zero-padded to
// 20 characters, so that non-negative starts sort as numbers.
func usagePadStart(start int64) string { return fmt.Sprintf("%020d", start) }

func usagePK(ns string, k store.UsageKey) string { return entityPK(ns, k.Entity) }

func usageSK(k store.UsageKey) string {
	return skUsagePrefix + k.Resource + "#" + string(k.Window) + "#" + usagePadStart(k.Start)
}

func usageGSI2SK(k store.UsageKey) string {
	return gsi2UsagePrefix + string(k.Window) + "#" + usagePadStart(k.Start) + "#" + k.Entity
}

func usageKeyItem(ns string, k store.UsageKey) item {
	return item{attrPK: str(usagePK(ns, k)), attrSK: str(usageSK(k))}
}

// usageSeqAttr names the attribute holding the last Seq applied from source. A
// source of letters, digits and "_.:-" of at most 64 bytes (a stream shard
// id, the Recorder's "local-…") is kept as is, which an operator can read;
// any other (empty, long, or with other bytes) becomes the first 128 bits
// of its SHA-256 in hex, after "seq~", which no verbatim name has. Expression
// placeholders would accept any name; the hash is there to bound the size
// each source adds to every item it writes.
func usageSeqAttr(source string) string {
	if len(source) > 0 && len(source) <= usageMaxRawSource && usageRawSource(source) {
		return seqRawPrefix + source
	}
	h := sha256.Sum256([]byte(source))
	return seqHashPrefix + hex.EncodeToString(h[:16])
}

func usageRawSource(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// usageTTLSeconds converts an expiry in ms to DynamoDB's TTL in seconds, rounded
// up so that DynamoDB never deletes a snapshot before it expires.
func usageTTLSeconds(ms int64) int64 { return (ms + 999) / 1000 }

// validateUsageIncrement checks the key (UsageKey.Validate: entity id and
// resource in the model's syntax, so neither holds the '#' that separates
// key parts) and the limit names, which become attribute names u_{limit}.
func validateUsageIncrement(in store.UsageIncrement) error {
	if err := in.Key.Validate(); err != nil {
		return err
	}
	for limit := range in.Consumed {
		if err := model.ValidateLimitName(limit); err != nil {
			return err
		}
	}
	return nil
}

// AddUsage implements store.UsageStore. The increments of one snapshot
// are written together, normally in one conditional UpdateItem that adds
// the counters of every increment still to apply and records, per Source,
// the highest Seq applied:
//
//	SET  seq_{source} = :last, (identity and index keys),
//	     exp = if_not_exists(exp, :exp), ttl = if_not_exists(ttl, :ttl)
//	ADD  u_{limit} :sum, events :sum
//	CONDITION (attribute_not_exists(seq_{source}) OR seq_{source} < :first) AND ...
//
// See addSnapshotUsage for why this is exactly once. Snapshots are written
// in parallel, at most 16 at once. The first error is returned and stops
// the rest; a retry of the whole call is always safe.
//
// The retention is a maximum, which a conditional update cannot compute
// while its condition is about the Seq; see raiseExpiry.
func (s *Store) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, in := range incs {
		if err := validateUsageIncrement(in); err != nil {
			return err
		}
	}
	// Group by snapshot, keeping the order given within each.
	var order []store.UsageKey
	groups := map[store.UsageKey][]store.UsageIncrement{}
	for _, in := range incs {
		if _, ok := groups[in.Key]; !ok {
			order = append(order, in.Key)
		}
		groups[in.Key] = append(groups[in.Key], in)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		next     = make(chan store.UsageKey)
		errOnce  sync.Once
		firstErr error
	)
	for range min(usageWriters, len(order)) {
		wg.Go(func() {
			for k := range next {
				if err := s.addSnapshotUsage(ctx, ns, k, groups[k]); err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel(err) // the rest would only be sent again
				}
			}
		})
	}
feed:
	for _, k := range order {
		select {
		case next <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return context.Cause(ctx)
}

// usageRun is the increments of one snapshot from one Source, in the
// order given, and what is known of the Seq stored for that Source.
type usageRun struct {
	attr  string
	incs  []store.UsageIncrement
	known *string // a lower bound of the stored Seq; nil: none known
}

// pending returns the increments of r that applying them one by one, in
// order, onto a stored Seq of *r.known would apply: those greater than the
// greatest Seq before them (the stored one included).
func (r *usageRun) pending() []store.UsageIncrement {
	var out []store.UsageIncrement
	last, ok := "", r.known != nil
	if ok {
		last = *r.known
	}
	for _, in := range r.incs {
		if !ok || in.Seq > last {
			out = append(out, in)
			last, ok = in.Seq, true
		}
	}
	return out
}

// usageSourcesPerWrite bounds the Sources one UpdateItem carries, which
// keeps its expressions far below DynamoDB's 4 KB per expression.
const usageSourcesPerWrite = 16

// addSnapshotUsage applies the increments of one snapshot.
//
// Per Source, what to apply is what one-by-one application in the order
// given would apply (usageRun.pending): the increments whose Seq exceeds
// every earlier one, starting from the stored Seq. Not knowing the stored
// Seq, the first write assumes it is below the first of them, and says so
// in its condition: "stored < first". If that holds, one-by-one application
// from the stored Seq applies exactly the same increments: the ones before
// the first pending were at most the bound it was computed from (itself at
// most the stored Seq, which only grows), so they are skipped either way,
// and from the first one on both start from the same Seq. So the merged
// write, which adds them all and stores the last (the greatest), is exactly
// what one write per increment would have done. If the condition fails,
// the old item comes back with the stored Seq of every Source; the pending
// increments are computed again from those (each failure drops at least
// the first pending increment of one Source, so this ends) and written
// with the same kind of condition. Nothing is read first: a fresh batch
// costs one write, a redelivered one one failed write, and one overlapping
// what was applied two. An SDK retry of a write whose response was lost
// fails its condition and so applies nothing twice.
func (s *Store) addSnapshotUsage(ctx context.Context, ns string, k store.UsageKey, incs []store.UsageIncrement) error {
	var (
		runs    []*usageRun
		byAttr  = map[string]*usageRun{}
		wantExp int64 // the greatest Expires given
		exp     int64 // the stored exp, as last seen
	)
	for _, in := range incs {
		wantExp = max(wantExp, in.Expires)
		attr := usageSeqAttr(in.Source)
		r := byAttr[attr]
		if r == nil {
			r = &usageRun{attr: attr}
			byAttr[attr] = r
			runs = append(runs, r)
		}
		r.incs = append(r.incs, in)
	}
	// Every write applies or rules out at least one increment.
	for attempt := 0; ; attempt++ {
		var parts []usagePart
		for _, r := range runs {
			if p := r.pending(); len(p) > 0 && len(parts) < usageSourcesPerWrite {
				parts = append(parts, usagePart{run: r, incs: p})
			}
		}
		if len(parts) == 0 {
			break
		}
		if attempt > len(incs) {
			return fmt.Errorf("dynamodb: add usage to %s/%s/%s@%d: no progress after %d writes", k.Entity, k.Resource, k.Window, k.Start, attempt)
		}
		it, applied, err := s.writeUsage(ctx, ns, k, parts, wantExp)
		if err != nil {
			return err
		}
		exp, _ = getN(it, attrUsageExpires) // 0 when none was ever given
		if applied {
			for _, p := range parts {
				last := p.incs[len(p.incs)-1].Seq
				p.run.known = &last
			}
			continue
		}
		for _, r := range runs {
			if v, ok := it[r.attr].(*types.AttributeValueMemberS); ok {
				r.known = &v.Value
			}
		}
	}
	if wantExp > 0 && wantExp > exp {
		return s.raiseExpiry(ctx, ns, k, wantExp)
	}
	return nil
}

// usagePart is what one write applies from one Source.
type usagePart struct {
	run  *usageRun
	incs []store.UsageIncrement // pending, Seq increasing
}

// writeUsage sends one merged update. It returns the item after the write
// (applied) or the item that failed the condition (not applied).
func (s *Store) writeUsage(ctx context.Context, ns string, k store.UsageKey, parts []usagePart, expires int64) (item, bool, error) {
	e := newExpr()
	setS := func(a, v string) { e.set = append(e.set, e.name(a)+" = "+e.value(str(v))) }
	// The item's identity and index keys, on every write: they never change,
	// so after the first write they rewrite equal values and no index.
	setS(attrEntity, k.Entity)
	setS(attrResource, k.Resource)
	setS(attrUsageWindow, string(k.Window))
	e.setN(attrUsageStart, k.Start)
	setS(attrGSI2PK, resourcePK(ns, k.Resource))
	setS(attrGSI2SK, usageGSI2SK(k))
	setS(attrGSI4PK, namespaceIndexPK(ns, usagePK(ns, k), usageSK(k)))
	setS(attrGSI4SK, usagePK(ns, k))
	if expires > 0 {
		// Only on creation: a conditional update cannot also keep the
		// greater of two values. A greater Expires is raised afterwards.
		for _, a := range []struct {
			name string
			v    int64
		}{{attrUsageExpires, expires}, {attrTTL, usageTTLSeconds(expires)}} {
			p := e.name(a.name)
			e.set = append(e.set, p+" = if_not_exists("+p+", "+e.value(num(a.v))+")")
		}
	}
	consumed := map[string]int64{}
	var events int64
	for _, p := range parts {
		for _, in := range p.incs {
			for limit, n := range in.Consumed {
				consumed[limit] += n
			}
			events += in.Events
		}
		seq := e.name(p.run.attr)
		e.set = append(e.set, seq+" = "+e.value(str(p.incs[len(p.incs)-1].Seq)))
		e.cond = append(e.cond, "(attribute_not_exists("+seq+") OR "+seq+" < "+e.value(str(p.incs[0].Seq))+")")
	}
	for _, limit := range slices.Sorted(maps.Keys(consumed)) {
		e.addN(usageCounterPrefix+limit, consumed[limit])
	}
	e.addN(attrUsageEvents, events)

	out, err := s.db.UpdateItem(ctx, e.updateItem(&s.table, usageKeyItem(ns, k), types.ReturnValueAllNew))
	var cond *types.ConditionalCheckFailedException
	switch {
	case asCond(err, &cond):
		return cond.Item, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("dynamodb: add usage to %s/%s/%s@%d: %w", k.Entity, k.Resource, k.Window, k.Start, err)
	}
	return out.Attributes, true, nil
}

// raiseExpiry sets the snapshot's exp (and ttl) to expires unless it is
// already at least that: a second, conditional write, needed only when the
// retention grows (the aggregator gives one per snapshot, so once at most).
// It runs whether or not the increments that gave expires were applied:
// taking a maximum is idempotent, and so a redelivered batch also repairs a
// raise lost between a first delivery's increment and its raise (the
// increment itself is then skipped). The snapshot must exist: a snapshot
// purged meanwhile is not brought back as an empty item.
func (s *Store) raiseExpiry(ctx context.Context, ns string, k store.UsageKey, expires int64) error {
	e := newExpr()
	e.setN(attrUsageExpires, expires)
	e.setN(attrTTL, usageTTLSeconds(expires))
	e.where("attribute_exists(%s)", attrPK, nil)
	p := e.name(attrUsageExpires)
	e.cond = append(e.cond, "(attribute_not_exists("+p+") OR "+p+" < "+e.value(num(expires))+")")
	_, err := s.db.UpdateItem(ctx, e.updateItem(&s.table, usageKeyItem(ns, k), ""))
	var cond *types.ConditionalCheckFailedException
	if err != nil && !asCond(err, &cond) {
		return fmt.Errorf("dynamodb: set usage retention of %s/%s/%s@%d: %w", k.Entity, k.Resource, k.Window, k.Start, err)
	}
	return nil
}
