package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Shard leases divide the stream's shards between the Read calls reading
// one table (docs/aggregator.md, "Several instances"). Everything lives in
// the registry partition next to the checkpoints:
//
//	_/SYSTEM#  #STREAM#{shard}         checkpoint: seq, done, ttl
//	_/SYSTEM#  #STREAMLEASE#{shard}    lease: owner, expires (Unix ms), ttl
//	_/SYSTEM#  #STREAMWORKER#{owner}   a live reader: expires (Unix ms), ttl
//
// so one Query (SK begins with "#STREAM") shows a reader the whole picture.
// Leases are separate items from checkpoints so that a checkpoint's
// never-backwards condition stays independent of who holds the shard: a
// reader that has lost its lease without knowing yet can still only move a
// checkpoint forward.
//
// A reader takes a shard with a conditional write that succeeds only when
// there is no lease, the lease is its own, or it has expired; renews its
// leases and its worker item every lease/3; drops a lease whose renewal
// fails its condition (someone else took it), and stops reading that shard
// at the next batch. expires is compared with the writer's own clock, so
// clocks of the readers must agree to well within the lease duration; more
// skew only makes two readers share a shard for a while, which costs
// repeated reads and never a double count (usage writes are exactly once per
// source, a stream shard and item, and sequence number; checkpoints never
// move back).

// DefaultShardLease is how long a stream shard lease lasts without renewal.
const DefaultShardLease = 10 * time.Second

const (
	skStreamPrefix = "#STREAM" // every item below, and the checkpoints
	skLeasePrefix  = "#STREAMLEASE#"
	skWorkerPrefix = "#STREAMWORKER#"
	skCheckpoint   = "#STREAM#"

	// leaseKeep is how long lease and worker items stay in the table after
	// they expire (TTL only collects garbage; expires decides).
	leaseKeep = 24 * time.Hour
)

// lease is a lease item as read.
type lease struct {
	owner   string
	expires int64 // Unix ms
}

// streamState is one look at the stream's items in the table.
type streamState struct {
	checkpoints map[string]streamCheckpoint // by shard
	leases      map[string]lease            // by shard
	workers     map[string]int64            // owner -> expires (Unix ms)
}

// streamState reads every checkpoint, lease and worker item, consistently.
func (t table) streamState(ctx context.Context) (streamState, error) {
	st := streamState{checkpoints: map[string]streamCheckpoint{}, leases: map[string]lease{}, workers: map[string]int64{}}
	in := &ddb.QueryInput{
		TableName: &t.name, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :p)"),
		ExpressionAttributeNames: map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": schema.Str(schema.RegistryPK()), ":p": schema.Str(skStreamPrefix),
		},
	}
	for {
		out, err := t.db.Query(ctx, in)
		if err != nil {
			return st, fmt.Errorf("dynamodb: read stream leases: %w", err)
		}
		for _, it := range out.Items {
			sk := schema.GetS(it, schema.AttrSK)
			expires, _ := schema.GetN(it, "expires") // absent reads as 0: expired
			switch {
			case strings.HasPrefix(sk, skLeasePrefix):
				st.leases[sk[len(skLeasePrefix):]] = lease{owner: schema.GetS(it, "owner"), expires: expires}
			case strings.HasPrefix(sk, skWorkerPrefix):
				st.workers[sk[len(skWorkerPrefix):]] = expires
			case strings.HasPrefix(sk, skCheckpoint):
				st.checkpoints[sk[len(skCheckpoint):]] = streamCheckpoint{seq: schema.GetS(it, "seq"), done: schema.GetBool(it, "done")}
			}
		}
		if in.ExclusiveStartKey = out.LastEvaluatedKey; len(in.ExclusiveStartKey) == 0 {
			return st, nil
		}
	}
}

func leaseKey(shard string) schema.Item {
	return schema.Item{schema.AttrPK: schema.Str(schema.RegistryPK()), schema.AttrSK: schema.Str(skLeasePrefix + shard)}
}

func workerKey(owner string) schema.Item {
	return schema.Item{schema.AttrPK: schema.Str(schema.RegistryPK()), schema.AttrSK: schema.Str(skWorkerPrefix + owner)}
}

// leaser holds one reader's leases. held is shared with the renewal
// goroutine; fair only with the round that sets it.
type leaser struct {
	s     table
	owner string
	lease time.Duration
	clk   clock.Clock

	mu   sync.Mutex
	held map[string]int64 // shard -> expires (Unix ms) as last written

	fair int // this reader's share of the readable shards, set by plan
}

func newLeaser(s table, o options) *leaser {
	return &leaser{s: s, owner: o.owner, lease: o.lease, clk: o.clock, held: map[string]int64{}}
}

func (l *leaser) now() int64 { return l.clk.Now().UnixMilli() }

// expiry returns the expires and ttl of a lease written now.
func (l *leaser) expiry() (expires, ttl int64) {
	t := l.clk.Now().Add(l.lease)
	return t.UnixMilli(), t.Add(leaseKeep).Unix()
}

// holds reports whether this reader may read shard: it holds the lease and,
// by its own clock, the lease has not run out (renewals that keep failing
// for another reason than a lost condition must not let it read on).
func (l *leaser) holds(shard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.held[shard]
	return ok && l.now() < e
}

func (l *leaser) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// take writes this reader's lease on shard if the shard has no lease, has
// this reader's, or has an expired one; it reports whether it did.
func (l *leaser) take(ctx context.Context, shard string) (bool, error) {
	expires, ttl := l.expiry()
	it := leaseKey(shard)
	it["owner"], it["expires"], it[schema.AttrTTL] = schema.Str(l.owner), schema.Num(expires), schema.Num(ttl)
	_, err := l.s.db.PutItem(ctx, &ddb.PutItemInput{
		TableName: &l.s.name, Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#owner) OR #owner = :me OR #expires <= :now"),
		ExpressionAttributeNames: map[string]string{"#owner": "owner", "#expires": "expires"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":me": schema.Str(l.owner), ":now": schema.Num(l.now()),
		},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamodb: take stream lease %s: %w", shard, err)
	}
	l.mu.Lock()
	l.held[shard] = expires
	l.mu.Unlock()
	return true, nil
}

// renew extends every lease this reader holds and announces it as live. A
// lease whose renewal fails its condition belongs to someone else now: it
// is dropped, and readShard stops at its next batch.
func (l *leaser) renew(ctx context.Context) error {
	errs := []error{l.heartbeat(ctx)}
	l.mu.Lock()
	shards := slices.Collect(maps.Keys(l.held))
	l.mu.Unlock()
	for _, shard := range shards {
		expires, ttl := l.expiry()
		_, err := l.s.db.UpdateItem(ctx, &ddb.UpdateItemInput{
			TableName: &l.s.name, Key: leaseKey(shard),
			UpdateExpression:         aws.String("SET #expires = :e, #ttl = :t"),
			ConditionExpression:      aws.String("#owner = :me"),
			ExpressionAttributeNames: map[string]string{"#owner": "owner", "#expires": "expires", "#ttl": schema.AttrTTL},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":me": schema.Str(l.owner), ":e": schema.Num(expires), ":t": schema.Num(ttl),
			},
		})
		l.mu.Lock()
		if _, still := l.held[shard]; still {
			// (A shard released meanwhile stays released: its item is gone,
			// so the condition failed, or it is about to be deleted.)
			switch {
			case isConditionFailed(err):
				delete(l.held, shard)
			case err == nil:
				l.held[shard] = expires
			}
		}
		l.mu.Unlock()
		if err != nil && !isConditionFailed(err) {
			errs = append(errs, fmt.Errorf("dynamodb: renew stream lease %s: %w", shard, err))
		}
	}
	return errors.Join(errs...)
}

// heartbeat writes this reader's worker item, which makes it count in
// everyone's fair share even while it holds no lease.
func (l *leaser) heartbeat(ctx context.Context) error {
	expires, ttl := l.expiry()
	it := workerKey(l.owner)
	it["expires"], it[schema.AttrTTL] = schema.Num(expires), schema.Num(ttl)
	if _, err := l.s.db.PutItem(ctx, &ddb.PutItemInput{TableName: &l.s.name, Item: it}); err != nil {
		return fmt.Errorf("dynamodb: stream worker heartbeat: %w", err)
	}
	return nil
}

// release gives a lease up at once, so that another reader need not wait
// for it to expire. Only this reader's lease is deleted.
func (l *leaser) release(ctx context.Context, shard string) error {
	l.mu.Lock()
	delete(l.held, shard)
	l.mu.Unlock()
	_, err := l.s.db.DeleteItem(ctx, &ddb.DeleteItemInput{
		TableName: &l.s.name, Key: leaseKey(shard),
		ConditionExpression:       aws.String("#owner = :me"),
		ExpressionAttributeNames:  map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":me": schema.Str(l.owner)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("dynamodb: release stream lease %s: %w", shard, err)
	}
	return nil
}

// releaseAll gives up every lease and the worker item: a clean stop.
func (l *leaser) releaseAll(ctx context.Context) error {
	l.mu.Lock()
	shards := slices.Collect(maps.Keys(l.held))
	l.mu.Unlock()
	var errs []error
	for _, shard := range shards {
		errs = append(errs, l.release(ctx, shard))
	}
	if _, err := l.s.db.DeleteItem(ctx, &ddb.DeleteItemInput{TableName: &l.s.name, Key: workerKey(l.owner)}); err != nil {
		errs = append(errs, fmt.Errorf("dynamodb: remove stream worker: %w", err))
	}
	return errors.Join(errs...)
}

// plan sets this reader's fair share of the readable shards (in reading
// order): ceil(readable / live readers), where the live readers are this
// one and every owner of an unexpired worker or lease item. It forgets
// leases the table shows as someone else's, and releases those of shards
// no longer readable and those beyond the fair share (the last ones in
// reading order), so that a reader that has just started finds shards to
// take.
func (l *leaser) plan(ctx context.Context, st streamState, readable []string) error {
	now := l.now()
	live := map[string]bool{l.owner: true}
	for owner, expires := range st.workers {
		if expires > now {
			live[owner] = true
		}
	}
	for _, ls := range st.leases {
		if ls.expires > now {
			live[ls.owner] = true
		}
	}
	l.fair = (len(readable) + len(live) - 1) / len(live)

	l.mu.Lock()
	for shard := range l.held {
		if st.leases[shard].owner != l.owner {
			delete(l.held, shard) // taken by someone else (or deleted) since
		}
	}
	l.mu.Unlock()
	keep := 0
	for _, shard := range readable {
		if l.holding(shard) {
			if keep++; keep <= l.fair {
				continue
			}
			if err := l.release(ctx, shard); err != nil {
				return err
			}
		}
	}
	l.mu.Lock()
	var gone []string
	for shard := range l.held {
		if !slices.Contains(readable, shard) {
			gone = append(gone, shard)
		}
	}
	l.mu.Unlock()
	for _, shard := range gone {
		if err := l.release(ctx, shard); err != nil {
			return err
		}
	}
	return nil
}

// holding reports whether held has shard, expired or not.
func (l *leaser) holding(shard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[shard]
	return ok
}

// acquire makes sure this reader holds shard before reading it: it keeps a
// lease it holds, and takes one only within its fair share and when st does
// not show a live lease of another reader (whose write would fail anyway).
func (l *leaser) acquire(ctx context.Context, shard string, st streamState) (bool, error) {
	if l.holds(shard) {
		return true, nil
	}
	if !l.holding(shard) && l.count() >= l.fair {
		return false, nil
	}
	if ls, ok := st.leases[shard]; ok && ls.owner != l.owner && ls.expires > l.now() {
		return false, nil
	}
	// Not held, or held but run out by this reader's clock (renewals
	// failing): the conditional write decides.
	return l.take(ctx, shard)
}

// renewEvery renews the leases every lease/3 until ctx ends. Errors are
// not fatal: a lease that cannot be renewed runs out, and holds stops the
// reading of its shard.
func (l *leaser) renewEvery(ctx context.Context) {
	for {
		if clock.Sleep(ctx, l.clk, l.lease/3) != nil {
			return
		}
		_ = l.renew(ctx)
	}
}

func isConditionFailed(err error) bool {
	var cond *ddbtypes.ConditionalCheckFailedException
	return errors.As(err, &cond)
}
