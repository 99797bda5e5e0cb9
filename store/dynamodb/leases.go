package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Durable lease records (store.Leases; docs/dynamodb.md 4.13). A record is
// an item of its own, in one of the namespace's lease partitions; it is
// created in the same transaction as its buckets' debits and deleted in the
// same transaction as their give-back, and both are conditioned on it, so
// a lease ends exactly once. A record never sits inside a bucket item:
// DynamoDB charges a write by the item's size, so every acquire of a bucket
// holding many open leases would pay for all of them. An ending that keeps
// a tombstone puts it as another item of the same partition
// (tombstones.go).

var _ store.Leases = (*Store)(nil)

// leaseKey is the key of the open record of lease id.
func leaseKey(ns, id string) item {
	return item{attrPK: str(schema.LeasePK(ns, id)), attrSK: str(id)}
}

// leaseBody is the part of a record kept as JSON in one attribute: read
// whole, never in conditions.
type leaseBody struct {
	Holder  string              `json:"holder,omitempty"`
	Created int64               `json:"created"`
	Buckets []store.LeaseBucket `json:"buckets"`
	Pending []store.LeaseDelta  `json:"pending,omitempty"`
}

// encodeLease returns the item of rec in namespace ns: its open record,
// or its tombstone if rec has ended (encodeTombstone).
func encodeLease(ns string, rec *store.LeaseRecord) (item, error) {
	body, err := json.Marshal(leaseBody{Holder: rec.Holder, Created: rec.Created, Buckets: rec.Buckets, Pending: rec.Pending})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: encode lease %q: %w", rec.ID, err)
	}
	if rec.Ended() {
		return encodeTombstone(ns, rec, string(body)), nil
	}
	it := leaseKey(ns, rec.ID)
	setLeaseAttrs(it, ns, rec, string(body))
	it[attrGSI3PK] = str(entityPK(ns, rec.Entity))
	it[attrGSI3SK] = str(schema.LeaseGSI3SK(rec.Resource, rec.ID))
	return it, nil
}

// setLeaseAttrs sets the attributes that open records and tombstones
// share: all but the keys of GSI3 and those of the ending.
func setLeaseAttrs(it item, ns string, rec *store.LeaseRecord, body string) {
	it[attrEntity] = str(rec.Entity)
	it[attrResource] = str(rec.Resource)
	it[schema.AttrLeaseVersion] = num(rec.Version)
	it[schema.AttrExpires] = num(rec.Expires)
	it[schema.AttrRecord] = str(body)
	it[attrGSI4PK] = str(ns)
	it[attrGSI4SK] = it[attrPK]
}

// decodeLease reads a lease item, an open record or a tombstone.
func decodeLease(it item) (store.LeaseRecord, error) {
	id, ended := strings.CutPrefix(getS(it, attrSK), schema.TombstoneMark)
	rec := store.LeaseRecord{ID: id, Entity: getS(it, attrEntity), Resource: getS(it, attrResource)}
	var body leaseBody
	var err1, err2, err4 error
	rec.Version, err1 = getN(it, schema.AttrLeaseVersion)
	rec.Expires, err2 = getN(it, schema.AttrExpires)
	err3 := json.Unmarshal([]byte(getS(it, schema.AttrRecord)), &body)
	if ended {
		err4 = decodeEnding(it, &rec)
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return store.LeaseRecord{}, fmt.Errorf("dynamodb: lease %q: %w", rec.ID, err)
	}
	rec.Holder, rec.Created, rec.Buckets, rec.Pending = body.Holder, body.Created, body.Buckets, body.Pending
	return rec, nil
}

// consumeLeased decides a request that carries a lease record: every
// bucket's planned write and the record's creation go in one transaction.
// It plans from this process's images of the items where it holds them
// (a warm acquire is one call), else from a consistent read; after a lost
// race, or a refusal planned from an image, it plans again from a read.
// A sharded bucket is debited on one shard, as the single-bucket path's
// first try would be.
func (s *Store) consumeLeased(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	if len(req.Lease.Buckets) != len(req.Buckets) {
		return false, model.Invalid("lease", req.Lease.ID, "the record must list the request's buckets in order")
	}
	if err := checkLeaseID(req.Lease.ID); err != nil {
		return false, err
	}
	cached := true
	for {
		ts := make([]*target, len(req.Buckets))
		for i := range req.Buckets {
			n := s.shardCounts.load(bucketID{ns, req.Buckets[i].Key})
			ts[i] = s.newTarget(&req.Buckets[i], s.pick(n)[0], n)
			req.Lease.Buckets[i].Placement = ts[i].shard
		}
		granted, err := s.transactLeased(ctx, ns, req, ts, cached)
		for i, t := range ts {
			t.report(&req.Buckets[i])
		}
		cause := retryCause(err)
		if cause == nil {
			return granted, err
		}
		cached = false
		if err := b.retry(ctx, cause); err != nil {
			return false, b.giveUp(err, "lease "+req.Lease.ID)
		}
	}
}

// transactLeased plans each target from its image and writes them with the
// record's creation, and the request's audit event if any, in one
// transaction.
func (s *Store) transactLeased(ctx context.Context, ns string, req *store.ConsumeRequest, ts []*target, cached bool) (bool, error) {
	imgs, fromCache, err := s.images(ctx, ns, ts, cached)
	if err != nil {
		return false, err
	}
	ws := make([]*write, len(ts))
	ok := true
	for i, t := range ts {
		if ws[i], err = s.planImage(ns, t, req.Now, imgs[i]); err != nil {
			return false, err
		}
		ok = ok && ws[i].sim.granted[0]
	}
	if !ok {
		if fromCache {
			return false, errReplan // a refusal counts only on what the table holds
		}
		return false, nil
	}
	creation, err := s.leaseCreation(ns, req)
	if err != nil {
		return false, err
	}
	items := make([]types.TransactWriteItem, 0, len(ts)+len(creation)+1)
	for _, w := range ws {
		items = append(items, w.transactItem())
	}
	items = append(items, creation...)
	if req.Event != nil {
		// The audit event rides in the same transaction (no extra call):
		// it is written if and only if the debit and the record are.
		ev, err := s.auditPut(ns, *req.Event)
		if err != nil {
			return false, err
		}
		items = append(items, ev)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		var canceled *types.TransactionCanceledException
		if errors.As(err, &canceled) && failedIn(canceled.CancellationReasons, len(ts), len(ts)+len(creation)) {
			return false, fmt.Errorf("lease %q: %w", req.Lease.ID, model.ErrLeaseExists)
		}
		if cause := txRetry(err); cause != nil {
			return false, cause
		}
		return false, fmt.Errorf("dynamodb: lease transaction: %w", err)
	}
	for i, w := range ws {
		s.lanes.remember(itemID{ns, ts[i].key, ts[i].shard}, s.afterWrite(w, imgs[i], ts[i].shards))
	}
	return true, nil
}

// failedIn reports whether the condition of any of the transaction's
// items from to to (excluded) failed.
func failedIn(reasons []types.CancellationReason, from, to int) bool {
	for i := from; i < to; i++ {
		if failed(reasons, i) {
			return true
		}
	}
	return false
}

// images returns the image of each target's item: this process's, where
// cached allows and it has one, else read consistently (one batch read for
// all missing). fromCache reports whether any came from this process.
func (s *Store) images(ctx context.Context, ns string, ts []*target, cached bool) ([]*image, bool, error) {
	imgs := make([]*image, len(ts))
	var keys []item
	var missing []int
	for i, t := range ts {
		if cached {
			imgs[i] = s.lanes.image(itemID{ns, t.key, t.shard})
		}
		if imgs[i] == nil {
			keys, missing = append(keys, t.itemKey(ns)), append(missing, i)
		}
	}
	if len(missing) == 0 {
		return imgs, true, nil
	}
	olds, err := s.readItems(ctx, s.newBudget(), keys)
	if err != nil {
		return nil, false, err
	}
	for j, i := range missing {
		if imgs[i], err = itemImage(olds[j]); err != nil {
			return nil, false, err
		}
	}
	return imgs, len(missing) < len(ts), nil
}

// afterWrite returns the item as the transaction left it, from the image
// it was planned on: exact when the image was, and otherwise a view whose
// next write fails its condition and returns the item (never a wrong
// grant).
func (s *Store) afterWrite(w *write, img *image, shards int) *image {
	after := w.sim.after(img)
	if !img.exists {
		after.shards = shards
	}
	w.meter.apply(after, w.meter.p)
	w.ttl.apply(after)
	return after
}

// GetLease implements store.Leases: a GetItem of the open record and, if
// there is none, one of the tombstone. Leases are resumed open far more
// often than ended, and then one GetItem (1 RCU) is all it costs, where a
// BatchGetItem of both keys would cost 2 RCU every time and is no faster
// (docs/dynamodb.md 4.13).
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	if err := checkLeaseID(id); err != nil {
		return store.LeaseRecord{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: leaseKey(ns, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return store.LeaseRecord{}, fmt.Errorf("dynamodb: read lease: %w", err)
	}
	it := out.Item
	if it != nil {
	} else if it, err = s.getTombstone(ctx, ns, id); err != nil {
		return store.LeaseRecord{}, err
	}
	if it == nil {
		return store.LeaseRecord{}, fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
	}
	return decodeLease(it)
}

// UpdateLease implements store.Leases: a PutItem of the open record
// conditioned on the stored version. A tombstone is another item, so the
// condition fails when the lease has ended (leaseRefused tells).
func (s *Store) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	if err := checkLeaseID(rec.ID); err != nil {
		return err
	}
	// The update of a tombstone, read and changed, goes to the open
	// record's key like any other, where it finds no record: a lease
	// ends by EndLease alone.
	rec.EndedAt, rec.EndedAs, rec.KeepUntil = 0, 0, 0
	it, err := encodeLease(ns, &rec)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:                 aws.String("#v = :v"),
		ExpressionAttributeNames:            map[string]string{"#v": schema.AttrLeaseVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(rec.Version - 1)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cond *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cond):
		return s.leaseRefused(ctx, ns, rec.ID, cond.Item)
	case err != nil:
		return fmt.Errorf("dynamodb: update lease: %w", err)
	}
	return nil
}

// EndLease implements store.Leases: one transaction deletes the record
// (conditioned on its version, and for a reconciler on its expiry), puts
// its tombstone if e keeps one (conditioned then on the record being the
// copy the tombstone is made from: e.Record, or one read, endedRecord),
// applies the deltas to
// each bucket item (the delta writes of addDeltas) and puts the audit
// event. A bucket item whose condition fails (a limit gone or changed, the
// item deleted) is read back from the cancellation and the transaction
// planned again; the record's condition failing is the answer, unless
// only the copy was stale. The SDK's idempotency token makes its own
// retries of the transaction safe.
func (s *Store) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := checkLeaseID(e.ID); err != nil {
		return err
	}
	var known *storedLease // the record a tombstone copies
	if e.KeepUntil > 0 {
		l, err := s.endedRecord(ctx, ns, &e)
		if err != nil {
			return err
		}
		known = &l
	}
	groups := groupDeltas(ns, e.Deltas)
	for i := range groups {
		groups[i].img = s.lanes.image(groups[i].id)
	}
	b := s.newBudget()
	for {
		items, err := s.endItems(ctx, ns, &e, groups, known)
		if err != nil {
			return err
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			for _, g := range groups {
				if g.img != nil && len(g.ds) > 0 {
					s.lanes.offer(g.id, g.img.withDeltas(g.ds))
				}
			}
			return nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) || txRetry(err) == nil {
			return fmt.Errorf("dynamodb: end lease: %w", err)
		}
		reasons := canceled.CancellationReasons
		if failed(reasons, 0) {
			old := reasons[0].Item
			l, ok := storedOf(old)
			if known == nil || !ok || !l.ends(&e) {
				return s.leaseRefused(ctx, ns, e.ID, old)
			}
			// Only the copy was stale (the ender's record, or the id's
			// record of another time): the tombstone is made again from
			// the record met.
			known = &l
		}
		cause := txRetry(err)
		if cause == errLostRace {
			if err := s.refreshGroups(groups, items, reasons); err != nil {
				return err
			}
		}
		if err := b.retry(ctx, cause); err != nil {
			return b.giveUp(err, "end lease "+e.ID)
		}
	}
}

// deltaGroup is the deltas of one bucket item, and the image they are
// written from (nil: not known).
type deltaGroup struct {
	id  itemID
	ds  []store.Delta
	img *image
	at  int // the group's index in the transaction; -1 if not in it
}

// groupDeltas groups deltas by the item they go to (their Placement's
// shard), merged per limit.
func groupDeltas(ns string, deltas []store.Delta) []deltaGroup {
	var out []deltaGroup
	for _, d := range deltas {
		id := itemID{ns, d.Key, max(d.Placement, 0)}
		i := slices.IndexFunc(out, func(g deltaGroup) bool { return g.id == id })
		if i < 0 {
			out = append(out, deltaGroup{id: id})
			i = len(out) - 1
		}
		out[i].ds = append(out[i].ds, d)
	}
	for i := range out {
		out[i].ds = mergeDeltas(out[i].ds)
	}
	return out
}

// endItems builds the ending's transaction: the record's deletion first,
// then, if known is not nil, the Put of the tombstone made from it, then
// each group's delta write (read first where its form is not known; a
// group left without deltas is dropped), then the event.
func (s *Store) endItems(ctx context.Context, ns string, e *store.LeaseEnding, groups []deltaGroup, known *storedLease) ([]types.TransactWriteItem, error) {
	cond := "#v = :v"
	vals := map[string]types.AttributeValue{":v": num(e.Version)}
	if e.ExpiredBy > 0 {
		cond += " AND #x > :zero AND #x <= :by"
		vals[":zero"], vals[":by"] = num(0), num(e.ExpiredBy)
	}
	items := []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: &s.table, Key: leaseKey(ns, e.ID), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#v": schema.AttrLeaseVersion, "#x": schema.AttrExpires},
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	if e.ExpiredBy <= 0 {
		delete(items[0].Delete.ExpressionAttributeNames, "#x")
	}
	if known != nil {
		tomb, err := known.tombstone(ns, e)
		if err != nil {
			return nil, err
		}
		known.copyCond(items[0].Delete)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: tomb}})
	}
	for i := range groups {
		g := &groups[i]
		g.at = -1
		forms, ok := s.deltaForms(g.id, g.img, g.ds)
		if !ok {
			img, err := s.readImage(ctx, g.id)
			if err != nil {
				return nil, err
			}
			g.img, g.ds = img, keepPresent(g.ds, img)
			if forms, ok = s.deltaForms(g.id, g.img, g.ds); !ok {
				return nil, fmt.Errorf("dynamodb: end lease %q: no form for the deltas of %s/%s (a bug)", e.ID, g.id.key.Entity, g.id.key.Resource)
			}
		}
		if len(g.ds) == 0 {
			continue
		}
		t := &target{key: g.id.key, shard: g.id.shard}
		u := deltaExpr(newOpID(), 0, g.ds, forms).updateItem(&s.table, t.itemKey(ns), "")
		ti := transactUpdate(u)
		ti.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		g.at = len(items)
		items = append(items, ti)
	}
	if e.Event != nil {
		ev, err := s.auditPut(ns, *e.Event)
		if err != nil {
			return nil, err
		}
		items = append(items, ev)
	}
	return items, nil
}

// refreshGroups takes, for each group whose write failed its condition,
// the item the cancellation returned: the next try plans from it, and
// drops the deltas of limits it no longer holds (as the contract says).
func (s *Store) refreshGroups(groups []deltaGroup, items []types.TransactWriteItem, reasons []types.CancellationReason) error {
	for i := range groups {
		g := &groups[i]
		if g.at < 0 || !failed(reasons, g.at) {
			continue
		}
		img, err := itemImage(reasons[g.at].Item)
		if err != nil {
			return err
		}
		g.img, g.ds = img, keepPresent(g.ds, img)
	}
	return nil
}

// withDeltas returns img with deltas ds applied, as their write applies
// them: a refilling limit's full tick moves by the debit's ticks, a
// concurrency limit's balance by the amount.
func (img *image) withDeltas(ds []store.Delta) *image {
	out := img.clone()
	for _, d := range ds {
		i := out.find(d.Limit)
		if i < 0 {
			continue
		}
		l := &out.limits[i]
		switch {
		case l.legacy:
			return nil // schema 1 deltas change what the image cannot tell
		case l.refills():
			l.ft = l.ft.Add(bucket.DebitTicks(d.Amount, l.params))
		default:
			l.tk -= d.Amount
		}
	}
	return out
}
