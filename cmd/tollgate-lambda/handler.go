package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// handler turns batches of stream records into usage, then hands them to
// the upkeep (splits of hot buckets), as `tollgate aggregator`
// does.
type handler struct {
	usage     store.UsageStore
	retention time.Duration
	// upkeep splits the buckets a batch shows hot; nil: none.
	upkeep *stream.Upkeep
	log    *slog.Logger
	// reconciler, if not nil, ends expired leases after a batch once
	// reconcileEvery has passed since it last did in this execution
	// environment (lastReconcile).
	reconciler     *reconcile.Reconciler
	reconcileEvery time.Duration
	lastReconcile  time.Time
	// mark, if not nil, writes the aggregator's mark in the table
	// (stream.WriteAggregatorMark), once per execution environment:
	// marked once it has.
	mark   func(context.Context) error
	marked bool
}

// errNoShard is returned for events without a shard id: the event source
// mapping has no tumbling window (see source).
var errNoShard = errors.New("tollgate-lambda: the event names no stream shard; " +
	"set TumblingWindowInSeconds (e.g. 900) on the event source mapping (docs/aggregator.md)")

// handle applies the bucket changes of one batch of stream records. An error
// makes Lambda hand the same records again, which is safe: usage is added
// exactly once per (Source, Seq). The upkeep's memory of the shard's recent
// writes (stream.Heat) goes from one invocation to the next in the
// tumbling window's state, which Lambda keeps per stream shard whichever
// execution environment runs the next batch, and starts afresh with every
// window. Its failures cost only the optimisation: they are logged, and the
// batch succeeds.
func (h *handler) handle(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	resp := events.DynamoDBTimeWindowEventResponse{
		TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}},
		BatchItemFailures:                 []events.DynamoDBBatchItemFailure{},
	}
	recs, err := imagesOf(ev)
	if err != nil {
		return resp, err
	}
	if changes := changesOfImages(recs); len(changes) > 0 {
		if err := aggregator.Apply(ctx, h.usage, changes, h.retention); err != nil {
			return resp, err
		}
	}
	if h.upkeep != nil {
		resp.State = h.tend(ctx, ev, recs)
	}
	h.markOnce(ctx)
	h.maybeReconcile(ctx)
	return resp, nil
}

// markOnce writes the aggregator's mark after the first batch this
// execution environment handles, and after the next if that failed. Its
// failures are logged, never the batch's: the mark only tells readers of
// usage that an aggregator runs on the table.
func (h *handler) markOnce(ctx context.Context) {
	if h.mark == nil || h.marked {
		return
	}
	if err := h.mark(ctx); err != nil {
		h.log.Warn("writing the aggregator's mark", "err", err)
		return
	}
	h.marked = true
}

// maybeReconcile runs a reconciler pass when one is due. Its failures are
// logged, never the batch's: the next pass, here or elsewhere, retries.
// Lambda runs one invocation at a time per execution environment, so the
// handler's fields need no lock.
func (h *handler) maybeReconcile(ctx context.Context) {
	if h.reconciler == nil || time.Since(h.lastReconcile) < h.reconcileEvery {
		return
	}
	h.lastReconcile = time.Now()
	n, err := h.reconciler.Once(ctx)
	if n > 0 || err != nil {
		h.log.Info("reconciled leases", "reclaimed", n, "err", err)
	}
}

// reconcileHandler is the function in reconcile mode: whatever invokes it
// (a schedule), it makes one reconciler pass.
type reconcileHandler struct {
	r   *reconcile.Reconciler
	log *slog.Logger
}

// reconcileResponse is what a reconcile invocation returns.
type reconcileResponse struct {
	Reclaimed int    `json:"reclaimed"`
	Skipped   uint64 `json:"skipped"`
	Failed    uint64 `json:"failed"`
}

// handle makes one pass. A pass with failures is an error, so that the
// invocation shows as failed in Lambda's metrics; the next scheduled one
// retries what failed.
func (h *reconcileHandler) handle(ctx context.Context, _ json.RawMessage) (reconcileResponse, error) {
	before := h.r.Stats()
	n, err := h.r.Once(ctx)
	after := h.r.Stats()
	resp := reconcileResponse{Reclaimed: n, Skipped: after.Skipped - before.Skipped, Failed: after.Failed - before.Failed}
	h.log.Info("reconciled leases", "reclaimed", resp.Reclaimed, "skipped", resp.Skipped, "failed", resp.Failed, "err", err)
	return resp, err
}

// tend hands the batch to the upkeep with the heat the window's state
// carries, and returns the state to carry on.
func (h *handler) tend(ctx context.Context, ev events.DynamoDBTimeWindowEvent, recs []stream.Record) map[string]string {
	heat, err := stream.HeatFromState(ev.State)
	if err != nil {
		h.log.Warn("tumbling window state", "shard", ev.ShardID, "err", err)
	}
	if len(recs) == 0 {
		return heat.State()
	}
	res, err := h.upkeep.Tend(ctx, heat, recs)
	if res.Split > 0 {
		h.log.Info("split hot buckets", "shard", ev.ShardID, "split", res.Split)
	}
	if err != nil {
		h.log.Warn("splitting hot buckets", "shard", ev.ShardID, "err", err)
	}
	return heat.State()
}

// changesOf turns the records of a batch into changes, in their order
// (records of other items than buckets, and deletions, are not changes).
func changesOf(ev events.DynamoDBTimeWindowEvent) ([]store.Change, error) {
	recs, err := imagesOf(ev)
	if err != nil {
		return nil, err
	}
	return changesOfImages(recs), nil
}

func changesOfImages(recs []stream.Record) []store.Change {
	var out []store.Change
	for _, r := range recs {
		if c, ok := stream.ChangeOf(r); ok {
			out = append(out, c)
		}
	}
	return out
}

// imagesOf checks the records of a batch and turns them into what the
// backend reads of a record, with their Source, in their order.
func imagesOf(ev events.DynamoDBTimeWindowEvent) ([]stream.Record, error) {
	if len(ev.Records) == 0 {
		return nil, nil // e.g. the final invocation of a window
	}
	if ev.ShardID == "" {
		return nil, errNoShard
	}
	out := make([]stream.Record, 0, len(ev.Records))
	for _, rec := range ev.Records {
		r := rec.Change
		if r.StreamViewType != string(events.DynamoDBStreamViewTypeNewAndOldImages) {
			return nil, fmt.Errorf("tollgate-lambda: stream record %s has view type %q; the table's stream must be NEW_AND_OLD_IMAGES",
				r.SequenceNumber, r.StreamViewType)
		}
		if !decimal(r.SequenceNumber) {
			return nil, fmt.Errorf("tollgate-lambda: stream record %s: sequence number %q is not a decimal number", rec.EventID, r.SequenceNumber)
		}
		src, err := source(ev.ShardID, r.Keys)
		if err != nil {
			return nil, fmt.Errorf("tollgate-lambda: stream record %s: %w", r.SequenceNumber, err)
		}
		out = append(out, stream.Record{
			Source:  src,
			Seq:     r.SequenceNumber,
			Time:    r.ApproximateCreationDateTime.Time,
			Removed: rec.EventName == string(events.DynamoDBOperationTypeRemove),
			Old:     imageOf(r.OldImage),
			New:     imageOf(r.NewImage),
		})
	}
	return out, nil
}

// source names the feed a record belongs to: its stream shard and its
// item's primary key, as in
//
//	shardId-00000001700000000000-0123abcd/"PK"=S"ns/BUCKET#key#res#0","SK"=S"#STATE"
//
// It is stream.Source of the record's Keys, the Source that `tollgate
// aggregator` (stream.Read) gives the same record,
// so that the function and the process are interchangeable: a record
// applied by either is skipped by the other.
//
// The record's sequence number is its Seq, which must grow within a
// Source (store.UsageStore skips an increment whose Seq is not above the
// last one of its Source). Stream sequence numbers grow within a shard;
// Lambda hands a shard's records in order, but with ParallelizationFactor
// above 1 it only keeps the order of each item's records, and the shards of
// a hot bucket are distinct items feeding one snapshot. A Source per shard
// could then apply a later record before an earlier one, which would be
// skipped; a Source per shard and item cannot. Lambda names the shard only
// in events of a tumbling window (shardId), hence errNoShard.
//
// The form must never change: a record handed again after a new version is
// deployed must name the same Source.
func source(shard string, keys map[string]events.DynamoDBAttributeValue) (string, error) {
	attrs := make(map[string]stream.KeyAttr, len(keys))
	for name, v := range keys {
		switch v.DataType() {
		case events.DataTypeString:
			attrs[name] = stream.KeyAttr{Type: "S", Text: v.String()}
		case events.DataTypeNumber:
			attrs[name] = stream.KeyAttr{Type: "N", Text: v.Number()}
		case events.DataTypeBinary:
			attrs[name] = stream.KeyAttr{Type: "B", Text: base64.StdEncoding.EncodeToString(v.Binary())}
		default:
			return "", fmt.Errorf("key attribute %s has a type keys cannot have (%d)", name, v.DataType())
		}
	}
	return stream.Source(shard, attrs)
}

// decimal reports whether s is a non-empty string of decimal digits, as
// stream sequence numbers are (they are compared as numbers once padded).
func decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
