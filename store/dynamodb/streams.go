package dynamodb

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tollgate-rl/tollgate/store"
)

// The change feed: the table's DynamoDB stream, read shard by shard (a
// parent before its children), turned into store.Changes of bucket items,
// with a checkpoint per stream shard in the table.

// seqWidth is the width Seq strings are padded to: stream sequence numbers
// are decimal strings of up to 40 digits, compared as numbers.
const seqWidth = 48

// ReadChanges reads the table's stream from the last checkpoint (or the
// oldest record) and hands handle every batch of bucket changes, in order
// within each stream shard, until ctx ends. A batch is checkpointed once
// handle returns nil; if it fails, ReadChanges returns the error and the
// next call hands the batch again (so handle must be idempotent per
// (Source, Seq), as store.UsageStore is). It polls open shards every poll
// interval, and returns nil once ctx ends.
//
// A change's Source is StreamSource of its record (the stream shard and the
// item's key) and its Seq the record's sequence number, exactly as the AWS
// Lambda handler (cmd/tollgate-lambda) gives them: a record applied by
// either consumer is skipped by the other, so a deployment can move from
// one to the other without counting anything twice.
//
// Several calls, in one process or many, divide the stream's shards
// between them with leases kept in the table (see leases.go): each reads
// only the shards it holds a lease on, takes at most its fair share,
// renews its leases while it runs and releases them when it returns, so
// that another reader takes over at once. The shards of a reader that dies
// wait until its leases expire (WithLease). Two readers of one shard (a
// lease taken from a reader that was paused) only repeat work: handle is
// idempotent and checkpoints never move back.
func (s *Store) ReadChanges(ctx context.Context, poll time.Duration, handle func(context.Context, []store.Change) error, opts ...ReadOption) error {
	desc, err := s.DescribeTable(ctx)
	if err != nil {
		return err
	}
	if desc.StreamARN == "" {
		return errors.New("dynamodb: the table has no stream (create it without WithoutStreams)")
	}
	o := newReadOptions(opts)
	leases := newLeaser(s, o)
	if err := leases.heartbeat(ctx); err != nil {
		return err
	}
	renewing, stopRenewing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { leases.renewEvery(renewing) })
	defer func() {
		stopRenewing()
		wg.Wait()
		if o.keepLeases {
			return
		}
		// ctx has usually ended here: release on a context of its own,
		// bounded, since a release that fails only makes the others wait
		// for the expiry.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = leases.releaseAll(rctx)
	}()
	r := &streamReader{s: s, arn: desc.StreamARN, client: s.streamsClient(), handle: handle, leases: leases, batch: 1000}
	for {
		progressed, err := r.round(ctx)
		switch {
		case ctx.Err() != nil:
			return nil // stopped; the checkpoints say where to go on
		case err != nil:
			return err
		}
		if !progressed {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(poll):
			}
		}
	}
}

// streamsClient returns a DynamoDB Streams client reaching the same
// endpoint, region and credentials as the table's client.
func (s *Store) streamsClient() *dynamodbstreams.Client {
	o := s.db.Options()
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region: o.Region, Credentials: o.Credentials, HTTPClient: o.HTTPClient, BaseEndpoint: o.BaseEndpoint,
		RetryMaxAttempts: o.RetryMaxAttempts, Retryer: o.Retryer, Logger: o.Logger,
	})
}

type streamReader struct {
	s      *Store
	arn    string
	client *dynamodbstreams.Client
	handle func(context.Context, []store.Change) error
	leases *leaser
	batch  int32 // records per GetRecords call: 1,000, the most; tests use fewer
}

// maxBatchesPerVisit bounds how long one shard is read before the round
// moves on: a shard that never runs dry would otherwise starve the others
// this reader holds, and delay the next plan of the leases.
const maxBatchesPerVisit = 10

// round reads every readable shard it holds (or can take) a lease on as
// far as it goes; it reports whether anything was read.
func (r *streamReader) round(ctx context.Context) (bool, error) {
	shards, err := r.shards(ctx)
	if err != nil {
		return false, err
	}
	st, err := r.s.streamState(ctx)
	if err != nil {
		return false, err
	}
	done := map[string]bool{}
	known := map[string]bool{}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		known[id], done[id] = true, st.checkpoints[id].done
	}
	// A shard is read once its parent is finished (or has aged out of the
	// stream).
	readable := func(sh types.Shard) bool {
		p := aws.ToString(sh.ParentShardId)
		return !done[aws.ToString(sh.ShardId)] && (p == "" || !known[p] || done[p])
	}
	var open []string
	for _, sh := range shards {
		if readable(sh) {
			open = append(open, aws.ToString(sh.ShardId))
		}
	}
	if err := r.leases.plan(ctx, st, open); err != nil {
		return false, err
	}
	progressed := false
	visited := map[string]bool{}
	// Shards come in creation order, so a few passes settle every chain
	// of parents finished in this round.
	for pass := 0; pass < 3; pass++ {
		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			if visited[id] || !readable(sh) {
				continue
			}
			visited[id] = true
			ok, err := r.leases.acquire(ctx, id, st)
			if err != nil {
				return progressed, err
			}
			if !ok {
				continue // another reader's
			}
			// Read afresh: the previous holder may have moved it since st.
			cp, err := r.s.checkpoint(ctx, id)
			if err != nil {
				return progressed, err
			}
			if !cp.done {
				n, closed, err := r.readShard(ctx, id, cp.seq)
				if err != nil {
					return progressed, err
				}
				progressed = progressed || n > 0
				if !closed {
					continue
				}
				if err := r.s.saveCheckpoint(ctx, id, "", true); err != nil {
					return progressed, err
				}
			}
			done[id] = true
			// A finished shard needs no lease; its children may need this
			// reader's share.
			if err := r.leases.release(ctx, id); err != nil {
				return progressed, err
			}
		}
	}
	return progressed, nil
}

func (r *streamReader) shards(ctx context.Context) ([]types.Shard, error) {
	var out []types.Shard
	var start *string
	for {
		d, err := r.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &r.arn, ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("dynamodb: describe stream: %w", err)
		}
		out = append(out, d.StreamDescription.Shards...)
		if start = d.StreamDescription.LastEvaluatedShardId; start == nil {
			return out, nil
		}
	}
}

// readShard reads one shard from after seq until it has no more records
// now, this reader no longer holds its lease, or maxBatchesPerVisit
// batches were read; closed reports that it never will have more (the
// shard is finished).
func (r *streamReader) readShard(ctx context.Context, shard, seq string) (n int, closed bool, err error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &r.arn, ShardId: &shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(unpadSeq(seq))
	}
	it, err := r.client.GetShardIterator(ctx, in)
	if err != nil {
		return 0, false, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
	}
	iter := it.ShardIterator
	for batches := 0; iter != nil; batches++ {
		// A lost lease stops the reading at the next batch; the new holder
		// goes on from the checkpoint.
		if batches == maxBatchesPerVisit || !r.leases.holds(shard) {
			return n, false, nil
		}
		out, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(r.batch)})
		if err != nil {
			return n, false, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
		}
		if len(out.Records) == 0 {
			return n, out.NextShardIterator == nil, nil
		}
		changes := make([]store.Change, 0, len(out.Records))
		for _, rec := range out.Records {
			c, ok, err := changeOf(shard, rec)
			if err != nil {
				return n, false, err
			}
			if ok {
				changes = append(changes, c)
			}
		}
		if len(changes) > 0 {
			if err := r.handle(ctx, changes); err != nil {
				return n, false, err
			}
		}
		last := padSeq(aws.ToString(out.Records[len(out.Records)-1].Dynamodb.SequenceNumber))
		if err := r.s.saveCheckpoint(ctx, shard, last, false); err != nil {
			return n, false, err
		}
		n += len(out.Records)
		iter = out.NextShardIterator
	}
	return n, true, nil
}

// minSeqWidth is the shortest sequence number the Streams API accepts;
// DynamoDB Local's are zero-padded to it.
const minSeqWidth = 21

// unpadSeq undoes padSeq for the Streams API: without the padding, but no
// shorter than minSeqWidth (a sequence number of DynamoDB Local keeps its
// own leading zeros; AWS's have none and are longer).
func unpadSeq(seq string) string {
	seq = strings.TrimLeft(seq, "0")
	if len(seq) < minSeqWidth {
		seq = strings.Repeat("0", minSeqWidth-len(seq)) + seq
	}
	return seq
}

func padSeq(seq string) string {
	if len(seq) >= seqWidth {
		return seq
	}
	return strings.Repeat("0", seqWidth-len(seq)) + seq
}

// changeOf turns a stream record of a bucket item into a change, whose
// Source is the one the Lambda handler gives the same record (StreamSource).
func changeOf(shard string, rec types.Record) (store.Change, bool, error) {
	sr := rec.Dynamodb
	if sr == nil {
		return store.Change{}, false, nil
	}
	var at time.Time
	if sr.ApproximateCreationDateTime != nil {
		at = *sr.ApproximateCreationDateTime
	}
	c, ok := ChangeOf(ImageChange{
		Seq: aws.ToString(sr.SequenceNumber), Time: at, Removed: rec.EventName == types.OperationTypeRemove,
		Old: streamImage(sr.OldImage), New: streamImage(sr.NewImage),
	})
	if !ok {
		return c, false, nil
	}
	// Only changes need a Source: records of other items (usage snapshots,
	// checkpoints, leases: this reader's own writes among them) are
	// dropped without one.
	src, err := StreamSourceOf(shard, sr.Keys)
	if err != nil {
		return store.Change{}, false, fmt.Errorf("dynamodb: stream shard %s, record %s: %w", shard, aws.ToString(sr.SequenceNumber), err)
	}
	c.Source = src
	return c, true, nil
}

// KeyAttr is one attribute of a stream record's item key (its Keys), in the
// form every consumer of the stream reads it: Type "S", "N" or "B", and
// Text the string, the number's decimal text as the stream gives it, or the
// binary value in standard base64 (with padding).
type KeyAttr struct {
	Type string
	Text string
}

// StreamSource is the Source of the change a stream record makes: the
// stream shard and the record's item key, as in
//
//	shardId-00000001700000000000-0123abcd/"PK"=S"ns/BUCKET#key#res#0","SK"=S"#STATE"
//
// (the shard, a slash, then each key attribute by name in byte order,
// separated by commas: the quoted name, "=", the type and the quoted text;
// quoted as Go's strconv.Quote does).
//
// Both consumers of the stream use it, the process reader (ReadChanges,
// through StreamSourceOf) and the AWS Lambda handler (cmd/tollgate-lambda),
// so that a record counts once, whichever of them applies it and however
// often either hands it again. The record's sequence number is the Seq,
// which must grow within a Source (store.UsageStore skips an increment
// whose Seq is not above the last one of its Source): sequence numbers grow
// within a stream shard, and Lambda, with a ParallelizationFactor above 1,
// keeps the order of each item's records only, while the shards of a split
// bucket are distinct items feeding one snapshot; a Source per stream shard
// and item stays in order under both consumers.
//
// The form must never change: a record handed again after a new version is
// deployed must name the same Source, or it counts twice.
func StreamSource(shard string, keys map[string]KeyAttr) (string, error) {
	if shard == "" {
		return "", errors.New("the record names no stream shard")
	}
	if len(keys) == 0 {
		return "", errors.New("the record has no item key")
	}
	var b strings.Builder
	b.WriteString(shard)
	b.WriteByte('/')
	for i, name := range slices.Sorted(maps.Keys(keys)) {
		k := keys[name]
		switch k.Type {
		case "S", "N", "B":
		default:
			return "", fmt.Errorf("key attribute %s has type %q; keys are S, N or B", name, k.Type)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name))
		b.WriteByte('=')
		b.WriteString(k.Type)
		b.WriteString(strconv.Quote(k.Text))
	}
	return b.String(), nil
}

// StreamSourceOf is StreamSource of the Keys of a record read from the
// DynamoDB Streams API: what ReadChanges gives its changes.
func StreamSourceOf(shard string, keys map[string]types.AttributeValue) (string, error) {
	attrs := make(map[string]KeyAttr, len(keys))
	for name, v := range keys {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			attrs[name] = KeyAttr{Type: "S", Text: v.Value}
		case *types.AttributeValueMemberN:
			attrs[name] = KeyAttr{Type: "N", Text: v.Value}
		case *types.AttributeValueMemberB:
			attrs[name] = KeyAttr{Type: "B", Text: base64.StdEncoding.EncodeToString(v.Value)}
		default:
			return "", fmt.Errorf("key attribute %s has a type keys cannot have (%T)", name, v)
		}
	}
	return StreamSource(shard, attrs)
}

// Image reads attributes of an item image: strings and numbers, as
// decimal text (the form every DynamoDB stream consumer gets them in).
type Image interface {
	S(name string) string
	N(name string) string
	Names() []string
}

// ImageChange is one stream record as any consumer of the stream sees it
// (this package's reader, or an AWS Lambda handler).
type ImageChange struct {
	// Source is the record's stream shard and item key, as StreamSource
	// writes them; the change's Source.
	Source   string
	Seq      string // the record's sequence number
	Time     time.Time
	Removed  bool
	Old, New Image // nil when absent
}

// ChangeOf turns a stream record of a bucket item into a change: the rise
// of each limit's consumed counter and of the acquire counter, dated by the
// record. Other items and deletions are not changes.
func ChangeOf(r ImageChange) (store.Change, bool) {
	if r.Removed || r.New == nil || r.New.S(attrSK) != skState {
		return store.Change{}, false
	}
	pk := r.New.S(attrPK)
	i := strings.Index(pk, "/BUCKET#")
	if i < 0 {
		return store.Change{}, false
	}
	c := store.Change{
		NS:       pk[:i],
		Key:      store.BucketKey{Entity: r.New.S(attrEntity), Resource: r.New.S(attrResource)},
		Time:     r.Time.UnixMilli(),
		Consumed: map[string]int64{},
		Events:   imageN(r.New, attrEvents) - imageN(r.Old, attrEvents),
		Shard:    int(imageN(r.New, attrShard)),
		Source:   r.Source,
		Seq:      padSeq(r.Seq),
	}
	suffix := "_" + fieldConsumed
	for _, name := range r.New.Names() {
		if strings.HasPrefix(name, "b_") && strings.HasSuffix(name, suffix) {
			if d := imageN(r.New, name) - imageN(r.Old, name); d != 0 {
				c.Consumed[name[2:len(name)-len(suffix)]] = d
			}
		}
	}
	return c, len(c.Consumed) > 0 || c.Events != 0
}

func imageN(img Image, name string) int64 {
	if img == nil {
		return 0
	}
	n, _ := strconv.ParseInt(img.N(name), 10, 64)
	return n
}

// streamImage adapts an image of the DynamoDB Streams API.
type streamImage map[string]types.AttributeValue

func (m streamImage) S(name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (m streamImage) N(name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func (m streamImage) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// streamCheckpoint is how far one stream shard has been read.
type streamCheckpoint struct {
	seq  string // last sequence number handled (padded); "" for none
	done bool   // the shard is closed and read to its end
}

func checkpointKey(shard string) map[string]ddbtypes.AttributeValue {
	return item{attrPK: str(registryPK()), attrSK: str(skCheckpoint + shard)}
}

func (s *Store) checkpoint(ctx context.Context, shard string) (streamCheckpoint, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: checkpointKey(shard), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return streamCheckpoint{}, fmt.Errorf("dynamodb: read stream checkpoint: %w", err)
	}
	return streamCheckpoint{seq: getS(out.Item, "seq"), done: getBool(out.Item, "done")}, nil
}

// saveCheckpoint records progress in a shard; it never moves a checkpoint
// back (two readers of one shard only repeat work).
func (s *Store) saveCheckpoint(ctx context.Context, shard, seq string, done bool) error {
	e := newExpr()
	if done {
		e.set = append(e.set, e.name("done")+" = "+e.value(boolean(true)))
	} else {
		e.set = append(e.set, e.name("seq")+" = "+e.value(str(seq)))
		e.where("(attribute_not_exists(%s) OR "+e.name("seq")+" < %v)", "seq", str(seq))
	}
	e.set = append(e.set, e.name("ttl")+" = "+e.value(num(time.Now().Add(48*time.Hour).Unix())))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: checkpointKey(shard), UpdateExpression: e.update(),
		ConditionExpression: e.condition(), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.attrValues(),
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("dynamodb: save stream checkpoint: %w", err)
	}
	return nil
}
