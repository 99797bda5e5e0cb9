package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// The change feed: the table's DynamoDB stream, read shard by shard (a
// parent before its children), turned into store.Changes of bucket items,
// with a checkpoint per stream shard in the table.

// Read reads the stream of s's table from the last checkpoint (or the
// oldest record) and hands handle every batch of bucket changes, in order
// within each stream shard, until ctx ends. A batch is checkpointed once
// handle returns nil; if it fails, Read returns the error and the
// next call hands the batch again (so handle must be idempotent per
// (Source, Seq), as store.UsageStore is). It polls open shards every poll
// interval, and returns nil once ctx ends.
//
// A change's Source is Source of its record (the stream shard and the
// item's key) and its Seq the record's sequence number, exactly as the AWS
// Lambda handler (cmd/tollgate-lambda) gives them: a record applied by
// either consumer is skipped by the other, so a deployment can move from
// one to the other without counting anything twice.
//
// Several calls, in one process or many, divide the stream's shards
// between them with shard leases kept in the table (see shardlease.go):
// each reads only the shards it holds a shard lease on, takes at most its
// fair share, renews its shard leases while it runs and releases them when
// it returns, so that another reader takes over at once. The shards of a
// reader that dies wait until its shard leases expire (WithShardLease).
// Two readers of one shard (a shard lease taken from a reader that was
// paused) only repeat work: handle is idempotent and checkpoints never
// move back.
//
// With WithUpkeep, every batch handled is then handed to the Upkeep, which
// splits the buckets it shows hot.
//
// When it starts, Read writes the aggregator's mark in the table (see
// WriteAggregatorMark), naming its shard lease owner.
//
// A shard whose checkpoint has aged out of the stream (the stream keeps
// records 24 hours; an outage longer than that) is read again from its
// oldest record: the records in between are lost to usage. Read logs it as
// an error and counts it (Stats.Trimmed).
func Read(ctx context.Context, s *dynamodb.Store, poll time.Duration, handle func(context.Context, []store.Change) error, opts ...Option) error {
	desc, err := s.Admin().DescribeTable(ctx)
	if err != nil {
		return err
	}
	if desc.StreamARN == "" {
		return errors.New("dynamodb: the table has no stream (create it without WithoutStreams)")
	}
	o := newOptions(opts)
	t := tableOf(s)
	leases := newLeaser(t, o)
	if err := leases.heartbeat(ctx); err != nil {
		return err
	}
	// The mark only tells readers of usage that an aggregator runs here:
	// failing to write it costs no usage.
	if err := t.writeAggregatorMark(ctx, o.owner, o.clock.Now()); err != nil {
		o.log.Warn("writing the aggregator's mark", "err", err)
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
	r := newStreamReader(t, desc.StreamARN, handle, leases, o)
	for {
		progressed, err := r.round(ctx)
		if o.onRound != nil {
			o.onRound()
		}
		switch {
		case ctx.Err() != nil:
			return nil // stopped; the checkpoints say where to go on
		case err != nil:
			return err
		}
		if !progressed && clock.Sleep(ctx, clock.Real{}, poll) != nil {
			return nil
		}
	}
}

// streamsClient returns a DynamoDB Streams client reaching the same
// endpoint, region and credentials as the table's client.
func (t table) streamsClient() *dynamodbstreams.Client {
	o := t.db.Options()
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region: o.Region, Credentials: o.Credentials, HTTPClient: o.HTTPClient, BaseEndpoint: o.BaseEndpoint,
		RetryMaxAttempts: o.RetryMaxAttempts, Retryer: o.Retryer, Logger: o.Logger,
	})
}

type streamReader struct {
	s      table
	arn    string
	client *dynamodbstreams.Client
	handle func(context.Context, []store.Change) error
	leases *leaser
	batch  int32 // records per GetRecords call: 1,000, the most; tests use fewer
	upkeep *Upkeep
	log    *slog.Logger
	stats  *Stats

	// Per stream shard this reader holds: where its reading goes on, and
	// what the upkeep remembers of its recent writes.
	iters map[string]shardIter
	heats map[string]*Heat
}

// shardIter is the iterator a shard's last visit stopped at, to go on from
// at the next visit if the checkpoint is still the one it follows: it saves
// a GetShardIterator call per visit, and is the only way past empty pages
// of a closed shard and past a stretch of the shard read from its oldest
// record without anything in it to checkpoint.
type shardIter struct {
	after string // the checkpoint (padded sequence number) it follows
	iter  *string
}

func newStreamReader(s table, arn string, handle func(context.Context, []store.Change) error, leases *leaser, o options) *streamReader {
	return &streamReader{
		s: s, arn: arn, client: s.streamsClient(), handle: handle, leases: leases, batch: 1000,
		upkeep: o.upkeep, log: o.log, stats: o.stats,
		iters: map[string]shardIter{}, heats: map[string]*Heat{},
	}
}

// maxBatchesPerVisit bounds how long one shard is read before the round
// moves on: a shard that never runs dry would otherwise starve the others
// this reader holds, and delay the next plan of the leases.
const maxBatchesPerVisit = 10

// maxEmptyPagesPerVisit bounds how many empty pages of a closed shard one
// visit follows towards its end (AWS may return empty pages before a
// shard's last one); the next visit goes on from the last of them.
const maxEmptyPagesPerVisit = 32

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
	closed := map[string]bool{}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		done[id] = st.checkpoints[id].done
		closed[id] = sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil
	}
	if err := r.leases.plan(ctx, st, readableShards(shards, done)); err != nil {
		return false, err
	}
	r.forgetUnheld()
	progressed := false
	visited := map[string]bool{}
	// Finishing a shard makes its children readable: go on until a pass
	// finds nothing new to visit.
	for more := true; more; {
		more = false
		for _, id := range readableShards(shards, done) {
			if visited[id] {
				continue
			}
			visited[id], more = true, true
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
				n, finished, err := r.readShard(ctx, id, closed[id], cp.seq)
				if err != nil {
					return progressed, err
				}
				progressed = progressed || n > 0
				if !finished {
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

// readableShards returns, in the order given (DescribeStream's, creation
// order), the shards to read now: those not done whose parent is done or
// no longer in the stream (aged out), so that a parent's records are read
// before its children's.
func readableShards(shards []types.Shard, done map[string]bool) []string {
	known := make(map[string]bool, len(shards))
	for _, sh := range shards {
		known[aws.ToString(sh.ShardId)] = true
	}
	var out []string
	for _, sh := range shards {
		id, p := aws.ToString(sh.ShardId), aws.ToString(sh.ParentShardId)
		if !done[id] && (p == "" || !known[p] || done[p]) {
			out = append(out, id)
		}
	}
	return out
}

// forgetUnheld drops the iterators and heat of shards this reader no
// longer holds: another reader may move them on meanwhile.
func (r *streamReader) forgetUnheld() {
	for id := range r.iters {
		if !r.leases.holding(id) {
			delete(r.iters, id)
		}
	}
	for id := range r.heats {
		if !r.leases.holding(id) {
			delete(r.heats, id)
		}
	}
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

// pageStep is what reading a shard does after a page of GetRecords.
type pageStep int

const (
	stepMore     pageStep = iota // read the next page
	stepCaughtUp                 // nothing more for now: stop this visit
	stepFinished                 // the shard is closed and read to its end
)

// nextStep decides from a page (how many records, whether it returned a
// next iterator) of a shard (closed: DescribeStream gave it an ending
// sequence number) whether to read on. No next iterator is the only sign
// that a shard is read to its end; an empty page of an open shard means the
// reader has caught up, but AWS may return empty pages from a closed shard
// before its end, which are followed.
func nextStep(records int, hasNext, closed bool) pageStep {
	switch {
	case !hasNext:
		return stepFinished
	case records == 0 && !closed:
		return stepCaughtUp
	}
	return stepMore
}

// readShard reads one shard from after seq until it has no more records
// now, this reader no longer holds its lease, or maxBatchesPerVisit
// batches were read; finished reports that it never will have more.
func (r *streamReader) readShard(ctx context.Context, shard string, closed bool, seq string) (n int, finished bool, err error) {
	iter, err := r.iterator(ctx, shard, seq)
	if err != nil {
		return 0, false, err
	}
	recovered := false
	for batches, empty := 0, 0; batches < maxBatchesPerVisit && empty < maxEmptyPagesPerVisit; {
		// A lost lease stops the reading at the next batch; the new holder
		// goes on from the checkpoint.
		if !r.leases.holds(shard) {
			return n, false, nil
		}
		out, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(r.batch)})
		if err != nil {
			delete(r.iters, shard)
			if recovered || recoveryFor(err) == recoverNone {
				return n, false, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
			}
			// Once per visit, so that a recovery that fails again is an
			// error rather than a loop.
			recovered = true
			if iter, err = r.recover(ctx, shard, seq, err); err != nil {
				return n, false, err
			}
			continue
		}
		if len(out.Records) > 0 {
			last, err := r.batchRead(ctx, shard, out.Records)
			if err != nil {
				return n, false, err
			}
			seq, n, batches = last, n+len(out.Records), batches+1
		} else {
			empty++
		}
		iter = out.NextShardIterator
		r.iters[shard] = shardIter{after: seq, iter: iter}
		switch nextStep(len(out.Records), iter != nil, closed) {
		case stepFinished:
			delete(r.iters, shard)
			return n, true, nil
		case stepCaughtUp:
			return n, false, nil
		}
	}
	return n, false, nil
}

// batchRead hands one page of a shard's records to handle, checkpoints
// it, then hands it to the upkeep; it returns the checkpoint.
func (r *streamReader) batchRead(ctx context.Context, shard string, recs []types.Record) (string, error) {
	r.stats.Records.Add(int64(len(recs)))
	images := make([]Record, 0, len(recs))
	changes := make([]store.Change, 0, len(recs))
	for _, rec := range recs {
		img, ok := recordImage(rec)
		if !ok {
			continue
		}
		images = append(images, img)
		c, ok, err := changeOfImage(shard, rec, img)
		if err != nil {
			return "", err
		}
		if ok {
			changes = append(changes, c)
		}
	}
	if len(changes) > 0 {
		if err := r.handle(ctx, changes); err != nil {
			return "", err
		}
	}
	last := padSeq(aws.ToString(recs[len(recs)-1].Dynamodb.SequenceNumber))
	if err := r.s.saveCheckpoint(ctx, shard, last, false); err != nil {
		return "", err
	}
	r.tend(ctx, shard, images)
	return last, nil
}

// tend hands a batch to the upkeep, if any. Its failures cost only the
// optimisation.
func (r *streamReader) tend(ctx context.Context, shard string, images []Record) {
	if r.upkeep == nil {
		return
	}
	heat := r.heats[shard]
	if heat == nil {
		heat = NewHeat()
		r.heats[shard] = heat
	}
	res, _ := r.upkeep.Tend(ctx, heat, images)
	r.stats.Split.Add(int64(res.Split))
	if res.Split > 0 {
		r.log.Info("split hot buckets", "shard", shard, "split", res.Split)
	}
}

// iterator returns where to read shard from after seq: the iterator the
// last visit stopped at if it follows seq, else a new one.
func (r *streamReader) iterator(ctx context.Context, shard, seq string) (*string, error) {
	if it, ok := r.iters[shard]; ok && it.after == seq && it.iter != nil {
		return it.iter, nil
	}
	iter, err := r.newIterator(ctx, shard, seq)
	if err != nil && recoveryFor(err) == recoverFromTrimHorizon {
		return r.recover(ctx, shard, seq, err)
	}
	return iter, err
}

// newIterator returns an iterator of shard after seq ("": from the oldest
// record).
func (r *streamReader) newIterator(ctx context.Context, shard, seq string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &r.arn, ShardId: &shard, ShardIteratorType: types.ShardIteratorTypeTrimHorizon}
	if seq != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(unpadSeq(seq))
	}
	it, err := r.client.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
	}
	return it.ShardIterator, nil
}

// recover returns the iterator to go on with after err (see recoveryFor).
func (r *streamReader) recover(ctx context.Context, shard, seq string, err error) (*string, error) {
	switch recoveryFor(err) {
	case recoverFromCheckpoint:
		return r.newIterator(ctx, shard, seq)
	case recoverFromTrimHorizon:
		r.stats.Trimmed.Add(1)
		r.log.Error("stream records lost to usage: the shard's checkpoint is older than the stream keeps (24 hours); "+
			"reading the shard again from its oldest record", "shard", shard, "checkpoint", seq, "err", err,
			"trimmed_total", r.stats.Trimmed.Load())
		iter, err := r.newIterator(ctx, shard, "")
		if err == nil {
			// Until a record of it is checkpointed, go on from here rather
			// than from the aged-out checkpoint again.
			r.iters[shard] = shardIter{after: seq, iter: iter}
		}
		return iter, err
	}
	return nil, fmt.Errorf("dynamodb: stream shard %s: %w", shard, err)
}

// recovery is how reading a shard goes on after a failed Streams call.
type recovery int

const (
	recoverNone recovery = iota // the call failed: the round fails, and is tried again
	// The iterator expired (15 minutes after it was made, e.g. behind a
	// long retry of a batch): a new one from the checkpoint loses nothing.
	recoverFromCheckpoint
	// The checkpoint is older than the stream keeps: nothing after it can
	// be read, and the shard is read from its oldest record.
	recoverFromTrimHorizon
)

// recoveryFor decides how reading goes on after err, from GetShardIterator
// or GetRecords.
func recoveryFor(err error) recovery {
	var trimmed *types.TrimmedDataAccessException
	var expired *types.ExpiredIteratorException
	switch {
	case errors.As(err, &trimmed):
		return recoverFromTrimHorizon
	case errors.As(err, &expired):
		return recoverFromCheckpoint
	}
	return recoverNone
}
