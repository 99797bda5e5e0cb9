package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.UsageStore = (*Store)(nil)

// Usage snapshots (store.UsageStore) live in three buckets of each
// namespace's bucket (docs/embedded.md, section 8), created by the
// namespace's first AddUsage:
//
//	usage              lp(entity) + lp(window) + resource + "#" + start -> usage record
//	usage-by-resource  lp(resource) + lp(window) + start + "#" + entity -> empty
//	usage-expiry       be64(expires) + usage key                        -> empty
//
// start is the window start formatted as %020d: exactly 20 bytes, so a key
// decodes from its end whatever the names hold. After the fixed prefix, a
// usage key is the snapshot's cursor in an entity listing and an index key
// its cursor in a resource listing (store.UsageQuery.UsageCursor), so both
// listings are range scans in the order the contract sorts them, and a page
// resumes with a Seek to prefix + q.After. The window comes before the
// resource so that one entity's snapshots of one window type are one range.
//
// The index keys hold every field of their snapshot's key, so they need no
// value: a resource listing reads each record it returns from usage. The
// expiry index (snapshots that expire, in expiry order) lets AddUsage find
// the expired ones without a scan.
var (
	bktUsage       = []byte("usage")
	bktUsageByRes  = []byte("usage-by-resource")
	bktUsageExpiry = []byte("usage-expiry")
)

// usageSweepMin is how many expired snapshots an AddUsage deletes at least
// (if there are so many): it deletes up to usageSweepMin plus the number of
// its increments, more than it can create, so deletion keeps up with
// creation while each call's transaction stays bounded.
const usageSweepMin = 64

// maxUsageNames bounds an entity and a resource together: the longest key
// (the expiry index's) adds at most 8 + 10 + 5 + 21 bytes to them.
const maxUsageNames = bolt.MaxKeySize - 64

var errCorruptUsage = errors.New("corrupt usage record")

// usageBuckets are a namespace's usage buckets.
type usageBuckets struct {
	snaps, byRes, expiry *bolt.Bucket
}

// usageBucketsOf returns the namespace's usage buckets, ok false if
// nothing was ever added to it.
func usageBucketsOf(nsb *bolt.Bucket) (usageBuckets, bool) {
	u := usageBuckets{sub(nsb, bktUsage), sub(nsb, bktUsageByRes), sub(nsb, bktUsageExpiry)}
	return u, u.snaps != nil && u.byRes != nil && u.expiry != nil
}

// usageBucketsForWrite returns the namespace's usage buckets, creating them.
// They are not in nsSubBuckets: files and namespaces without usage stay as
// they were.
func usageBucketsForWrite(nsb *bolt.Bucket) (usageBuckets, error) {
	var bs [3]*bolt.Bucket
	for i, name := range [][]byte{bktUsage, bktUsageByRes, bktUsageExpiry} {
		b, err := nsb.CreateBucketIfNotExists(name)
		if err != nil {
			return usageBuckets{}, err
		}
		bs[i] = b
	}
	return usageBuckets{bs[0], bs[1], bs[2]}, nil
}

// AddUsage implements store.UsageStore. All increments of a call are
// applied in one bbolt transaction, committed (fsynced) before it returns.
// The transaction first deletes expired snapshots of the namespace (see
// usageSweepMin), as of the store's clock (WithClock).
func (s *Store) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkNS(ns); err != nil {
		return err
	}
	for i := range incs {
		if err := checkUsageKey(incs[i].Key); err != nil {
			return err
		}
	}
	if len(incs) == 0 {
		return nil
	}
	now := s.opts.clock.Now().UnixMilli()
	return s.mapErr(s.db.Update(func(tx *bolt.Tx) error {
		nsb, err := nsBucketForWrite(tx, ns)
		if err != nil {
			return err
		}
		u, err := usageBucketsForWrite(nsb)
		if err != nil {
			return err
		}
		// Expired snapshots go before the increments apply, so that a
		// call never deletes what it has just written: a late increment
		// to an expired snapshot lives until the next call (ListUsage
		// with Now hides it meanwhile).
		if _, err := u.sweep(now, usageSweepMin+len(incs)); err != nil {
			return err
		}
		return u.add(incs)
	}))
}

// usageChange is a snapshot AddUsage changes.
type usageChange struct {
	key        store.UsageKey
	rec        *usageRec
	existed    bool
	oldExpires int64
	changed    bool
}

// add applies incs, reading each snapshot once and writing each changed
// one once, in key order.
func (u usageBuckets) add(incs []store.UsageIncrement) error {
	changes := make(map[string]*usageChange, len(incs))
	for i := range incs {
		in := &incs[i]
		uk := usageKey(in.Key)
		ch := changes[string(uk)]
		if ch == nil {
			ch = &usageChange{key: in.Key}
			if v := u.snaps.Get(uk); v != nil {
				rec, err := decodeUsageRec(v)
				if err != nil {
					return fmt.Errorf("embedded: usage %q: %w", uk, err)
				}
				ch.rec, ch.existed, ch.oldExpires = rec, true, rec.expires
			} else {
				ch.rec = &usageRec{consumed: map[string]int64{}, applied: map[string]string{}}
			}
			changes[string(uk)] = ch
		}
		if ch.rec.apply(in) {
			ch.changed = true
		}
	}
	for _, uk := range slices.Sorted(maps.Keys(changes)) {
		ch := changes[uk]
		if !ch.changed {
			continue // a redelivery: not even rewritten
		}
		// A fresh value each time: bbolt keeps keys and values given
		// to Put until the transaction ends.
		if err := u.snaps.Put([]byte(uk), appendUsageRec(nil, ch.rec)); err != nil {
			return err
		}
		if !ch.existed {
			if err := u.byRes.Put(byResKey(ch.key), nil); err != nil {
				return err
			}
		}
		if ch.rec.expires == ch.oldExpires {
			continue
		}
		if ch.oldExpires != 0 {
			if err := u.expiry.Delete(expiryKey(ch.oldExpires, []byte(uk))); err != nil {
				return err
			}
		}
		if ch.rec.expires != 0 {
			if err := u.expiry.Put(expiryKey(ch.rec.expires, []byte(uk)), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweep deletes up to limit snapshots that expired at or before now,
// oldest expiry first, and returns how many it deleted.
func (u usageBuckets) sweep(now int64, limit int) (int, error) {
	// Collected first: bbolt's cursors do not promise to survive
	// deletions in their bucket.
	var gone [][]byte
	c := u.expiry.Cursor()
	for k, _ := c.First(); k != nil && len(gone) < limit; k, _ = c.Next() {
		expires, _, ok := splitExpiryKey(k)
		if !ok {
			return 0, fmt.Errorf("embedded: usage expiry key %q: %w", k, errCorruptUsage)
		}
		if expires > now {
			break
		}
		gone = append(gone, slices.Clone(k))
	}
	for _, k := range gone {
		_, uk, _ := splitExpiryKey(k)
		if err := u.deleteSnapshot(uk, k); err != nil {
			return 0, err
		}
	}
	return len(gone), nil
}

// deleteSnapshot deletes the snapshot with usage key uk from the three
// buckets; ek is its expiry key if the caller knows it, else nil.
func (u usageBuckets) deleteSnapshot(uk, ek []byte) error {
	key, ok := parseUsageKey(uk)
	if !ok {
		return fmt.Errorf("embedded: usage key %q: %w", uk, errCorruptUsage)
	}
	if ek == nil {
		v := u.snaps.Get(uk)
		if v == nil {
			return nil
		}
		rec, err := decodeUsageRec(v)
		if err != nil {
			return fmt.Errorf("embedded: usage %q: %w", uk, err)
		}
		if rec.expires != 0 {
			ek = expiryKey(rec.expires, uk)
		}
	}
	if ek != nil {
		if err := u.expiry.Delete(ek); err != nil {
			return err
		}
	}
	if err := u.byRes.Delete(byResKey(key)); err != nil {
		return err
	}
	return u.snaps.Delete(uk)
}

// deleteEntityUsage deletes every snapshot of entity in the namespace
// (DeleteEntity): its usage keys are one range, under lp(entity).
func deleteEntityUsage(nsb *bolt.Bucket, entity string) error {
	u, ok := usageBucketsOf(nsb)
	if !ok {
		return nil
	}
	prefix := entityPrefix(entity)
	var keys [][]byte
	c := u.snaps.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, uk := range keys {
		if err := u.deleteSnapshot(uk, nil); err != nil {
			return err
		}
	}
	return nil
}

// ListUsage implements store.UsageStore. An entity's snapshots are read in
// key order from usage, a resource's from usage-by-resource; both skip
// ahead to q.From, stop (or, for an entity, jump to the next resource) at
// q.To, and stop when the page is full.
func (s *Store) ListUsage(ctx context.Context, ns string, q store.UsageQuery) ([]store.UsageSnapshot, error) {
	limit, err := q.Validate()
	if err != nil {
		return nil, err
	}
	var out []store.UsageSnapshot
	err = s.view(ctx, func(tx *bolt.Tx) error {
		u, ok := usageBucketsOf(nsBucket(tx, ns))
		if !ok {
			return nil
		}
		l := usageLister{u: u, q: q, limit: limit}
		var err error
		if q.ByEntity() {
			err = l.byEntity()
		} else {
			err = l.byResource()
		}
		out = l.out
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// usageLister fills one page of a listing.
type usageLister struct {
	u     usageBuckets
	q     store.UsageQuery
	limit int
	out   []store.UsageSnapshot
}

// seekFrom is where a scan of keys prefix + cursor starts: at lower
// (within the prefix), or after q.After if that is further.
func (l *usageLister) seekFrom(prefix, lower []byte) []byte {
	from := lower
	if l.q.After != "" {
		if after := append(slices.Clip(prefix), l.q.After...); bytes.Compare(after, from) > 0 {
			from = after
		}
	}
	return from
}

// startBound is prefix + the first start a scan needs, if a Seek can skip
// to it: starts sort as strings (%020d), which is their numeric order only
// from 0 up (negative ones come first, in reverse).
func (l *usageLister) startBound(prefix []byte) []byte {
	if l.q.From <= 0 {
		return prefix
	}
	return appendStart(slices.Clip(prefix), l.q.From)
}

// pastTo reports whether start and every later start of the same scan are
// at or after q.To.
func (l *usageLister) pastTo(start int64) bool {
	return start >= 0 && start >= l.q.To
}

// offer adds the snapshot with key k and record v to the page if the query
// selects it, and reports whether the page is full.
func (l *usageLister) offer(k store.UsageKey, uk, v []byte) (bool, error) {
	if !l.q.IsAfter(k) || k.Start < l.q.From || k.Start >= l.q.To {
		return false, nil
	}
	rec, err := decodeUsageRec(v)
	if err != nil {
		return false, fmt.Errorf("embedded: usage %q: %w", uk, err)
	}
	if !l.q.Matches(k, rec.expires) {
		return false, nil
	}
	l.out = append(l.out, store.UsageSnapshot{Key: k, Consumed: rec.consumed, Events: rec.events, Expires: rec.expires, Cursor: l.q.UsageCursor(k)})
	return len(l.out) == l.limit, nil
}

// byEntity lists an entity's snapshots: keys prefix + resource + "#" +
// start, in the order of the listing.
func (l *usageLister) byEntity() error {
	q := l.q
	prefix := entityWindowPrefix(q.Entity, q.Window)
	scope, lower := prefix, prefix
	if q.Resource != "" {
		scope = append(append(slices.Clip(prefix), q.Resource...), '#')
		lower = l.startBound(scope)
	}
	c := l.u.snaps.Cursor()
	for k, v := c.Seek(l.seekFrom(prefix, lower)); k != nil && hasPrefix(k, scope); {
		resource, start, ok := splitNameStart(k[len(prefix):])
		if !ok {
			return fmt.Errorf("embedded: usage key %q: %w", k, errCorruptUsage)
		}
		// rp starts this resource's keys.
		rp := func() []byte { return append(append(slices.Clip(prefix), resource...), '#') }
		switch {
		case l.pastTo(start):
			if q.Resource != "" {
				return nil
			}
			// On to the next resource: every key of this one is
			// rp + a digit or '-', below rp + 0xff.
			k, v = c.Seek(append(rp(), 0xff))
			continue
		case start < q.From && q.From > 0:
			k, v = c.Seek(l.seekFrom(prefix, l.startBound(rp())))
			continue
		}
		key := store.UsageKey{Entity: q.Entity, Resource: resource, Window: q.Window, Start: start}
		full, err := l.offer(key, k, v)
		if err != nil || full {
			return err
		}
		k, v = c.Next()
	}
	return nil
}

// byResource lists a resource's snapshots: index keys prefix + start + "#"
// + entity, in the order of the listing, each read from usage.
func (l *usageLister) byResource() error {
	q := l.q
	prefix := resourceWindowPrefix(q.Resource, q.Window)
	c := l.u.byRes.Cursor()
	for k, _ := c.Seek(l.seekFrom(prefix, l.startBound(prefix))); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		start, entity, ok := splitStartName(k[len(prefix):])
		if !ok {
			return fmt.Errorf("embedded: usage index key %q: %w", k, errCorruptUsage)
		}
		if l.pastTo(start) {
			return nil
		}
		key := store.UsageKey{Entity: entity, Resource: q.Resource, Window: q.Window, Start: start}
		if !q.IsAfter(key) || start < q.From {
			continue // before reading the record
		}
		uk := usageKey(key)
		v := l.u.snaps.Get(uk)
		if v == nil {
			return fmt.Errorf("embedded: usage index key %q without its record: %w", k, errCorruptUsage)
		}
		full, err := l.offer(key, uk, v)
		if err != nil || full {
			return err
		}
	}
	return nil
}
