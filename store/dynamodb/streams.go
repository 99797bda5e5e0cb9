package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
func (s *Store) ReadChanges(ctx context.Context, poll time.Duration, handle func(context.Context, []store.Change) error) error {
	desc, err := s.DescribeTable(ctx)
	if err != nil {
		return err
	}
	if desc.StreamARN == "" {
		return errors.New("dynamodb: the table has no stream (create it without WithoutStreams)")
	}
	r := &streamReader{s: s, arn: desc.StreamARN, client: s.streamsClient(), handle: handle}
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
}

// round reads every readable shard as far as it goes; it reports whether
// anything was read.
func (r *streamReader) round(ctx context.Context) (bool, error) {
	shards, err := r.shards(ctx)
	if err != nil {
		return false, err
	}
	done := map[string]bool{}
	known := map[string]bool{}
	for _, sh := range shards {
		known[aws.ToString(sh.ShardId)] = true
	}
	progressed := false
	// Parents first: a shard is read once its parent is finished (or has
	// aged out of the stream). Shards come in creation order, so a few
	// passes settle every chain.
	for pass := 0; pass < 3; pass++ {
		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			if done[id] {
				continue
			}
			if p := aws.ToString(sh.ParentShardId); p != "" && known[p] && !done[p] {
				continue
			}
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
// now; closed reports that it never will (the shard is finished).
func (r *streamReader) readShard(ctx context.Context, shard, seq string) (n int, closed bool, err error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &r.arn, ShardId: &shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(strings.TrimLeft(seq, "0"))
	}
	it, err := r.client.GetShardIterator(ctx, in)
	if err != nil {
		return 0, false, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
	}
	iter := it.ShardIterator
	for iter != nil {
		out, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			return n, false, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
		}
		if len(out.Records) == 0 {
			return n, out.NextShardIterator == nil, nil
		}
		changes := make([]store.Change, 0, len(out.Records))
		for _, rec := range out.Records {
			if c, ok := changeOf(shard, rec); ok {
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

func padSeq(seq string) string {
	if len(seq) >= seqWidth {
		return seq
	}
	return strings.Repeat("0", seqWidth-len(seq)) + seq
}

// changeOf turns a stream record of a bucket item into a change: the rise
// of each limit's consumed counter and of the acquire counter. Other items
// and deletions are not changes.
func changeOf(shard string, rec types.Record) (store.Change, bool) {
	sr := rec.Dynamodb
	if sr == nil || rec.EventName == types.OperationTypeRemove || streamS(sr.NewImage, attrSK) != skState {
		return store.Change{}, false
	}
	pk := streamS(sr.NewImage, attrPK)
	i := strings.Index(pk, "/BUCKET#")
	if i < 0 {
		return store.Change{}, false
	}
	c := store.Change{
		NS:       pk[:i],
		Key:      store.BucketKey{Entity: streamS(sr.NewImage, attrEntity), Resource: streamS(sr.NewImage, attrResource)},
		Consumed: map[string]int64{},
		Events:   streamN(sr.NewImage, attrEvents) - streamN(sr.OldImage, attrEvents),
		Source:   shard,
		Seq:      padSeq(aws.ToString(sr.SequenceNumber)),
	}
	if t := sr.ApproximateCreationDateTime; t != nil {
		c.Time = t.UnixMilli()
	}
	suffix := "_" + fieldConsumed
	for name := range sr.NewImage {
		if strings.HasPrefix(name, "b_") && strings.HasSuffix(name, suffix) {
			if d := streamN(sr.NewImage, name) - streamN(sr.OldImage, name); d != 0 {
				c.Consumed[name[2:len(name)-len(suffix)]] = d
			}
		}
	}
	return c, len(c.Consumed) > 0 || c.Events != 0
}

func streamS(img map[string]types.AttributeValue, name string) string {
	if v, ok := img[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func streamN(img map[string]types.AttributeValue, name string) int64 {
	if v, ok := img[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// streamCheckpoint is how far one stream shard has been read.
type streamCheckpoint struct {
	seq  string // last sequence number handled (padded); "" for none
	done bool   // the shard is closed and read to its end
}

func checkpointKey(shard string) map[string]ddbtypes.AttributeValue {
	return item{attrPK: str(registryPK()), attrSK: str("#STREAM#" + shard)}
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
	var cond *ddbtypes.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &cond) {
		return fmt.Errorf("dynamodb: save stream checkpoint: %w", err)
	}
	return nil
}
