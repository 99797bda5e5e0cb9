package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// aggregatorConfig is what the flags of tollgate aggregator say.
type aggregatorConfig struct {
	poll, retention, lease time.Duration
	upkeep                 bool
	// reconcile is the reconciler's interval; 0: none.
	reconcile time.Duration
}

func newAggregatorCmd(g *globals) *cobra.Command {
	var upkeep bool
	var poll, retention, lease, reconcileEvery time.Duration
	var logLevel, logFormat string
	cmd := &cobra.Command{
		Use:   "aggregator",
		Short: "Turn the DynamoDB table's stream into usage snapshots",
		Long: `Read the DynamoDB stream of the table named by --store, from where the last
run stopped (a checkpoint per stream shard, kept in the table), and write
hourly and daily usage snapshots from every bucket change. A record handed
twice counts once, so restarts and crashes never double-count.

It is interchangeable with the AWS Lambda function (tollgate-lambda): both
name a record's usage by its stream shard and item key, so a record applied
by one is skipped by the other, and a deployment can move from one to the
other (or run both for a while) without counting anything twice.

Several instances may run on one table: they divide the stream's shards
between them with shard leases kept in the table (--shard-lease long, renewed
every third of that). One that stops cleanly hands its shards over at once;
the shards of one that dies wait until its shard leases expire. The
machines' clocks must agree to well within --shard-lease.

A batch whose usage write fails is written again, backing off from a second
to 30 seconds, before the stream moves on; a reader that fails is started
again the same way.

With --upkeep (the default) it also splits hot buckets ahead of their
writers, as the Lambda function does: it doubles the shards of a bucket
whose shard 0 takes writes at 80% of its write-pressure limit.

It also reconciles durable leases (--reconcile-interval, as tollgate
reconcile does): leases whose expiry has passed are ended and what they hold
comes back, once, however many reconcilers run.

A stream shard whose checkpoint is older than the stream keeps (24 hours) is
read again from its oldest record: the records in between are lost to usage,
and an error says so.

Stores other than DynamoDB need no aggregator: tollgate serve records their
usage itself.`,
		Example: "  tollgate aggregator --store 'dynamodb://tollgate?region=eu-west-1'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("retention") {
				d, err := envRetention()
				if err != nil {
					return err
				}
				retention = d
			}
			if retention <= 0 {
				return usagef("--retention %v: want a positive duration", retention)
			}
			if reconcileEvery < 0 {
				return usagef("--reconcile-interval %v: want a positive duration, or 0 for none", reconcileEvery)
			}
			if lease < time.Second {
				// Shorter leases are mostly spent renewing, and lost to
				// any slow call.
				return usagef("--shard-lease %v: at least 1s", lease)
			}
			log, err := newLogger(g, logLevel, logFormat)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			st, err := g.dynamoStore(ctx)
			if err != nil {
				return err
			}
			if err := st.Admin().CheckTable(ctx); err != nil {
				return err
			}
			aggregate(ctx, st, log, aggregatorConfig{poll: poll, retention: retention, lease: lease, upkeep: upkeep, reconcile: reconcileEvery})
			return nil
		},
	}
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often to look for new stream records")
	cmd.Flags().BoolVar(&upkeep, "upkeep", true, "split buckets written at 80% of their write-pressure limit, ahead of their writers")
	// Its former name, from when the upkeep also refilled bucket items
	// (which a stored full tick does not need).
	cmd.Flags().BoolVar(&upkeep, "refill", true, "")
	_ = cmd.Flags().MarkDeprecated("refill", "use --upkeep (bucket items need no proactive refill any more)")
	cmd.Flags().DurationVar(&lease, "shard-lease", stream.DefaultShardLease, "how long a stream shard stays with an instance that stops renewing its shard lease")
	daysVar(cmd.Flags(), &retention, "retention", aggregator.DefaultRetention, "how long snapshots are kept after their window (env "+envRetentionName+")")
	cmd.Flags().DurationVar(&reconcileEvery, "reconcile-interval", reconcile.DefaultInterval, "how often to end expired durable leases, 0 for never (another process must then)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

// aggregate reads the stream of st's table into usage until ctx ends: each
// batch is written before the stream moves on (retried with backoff, never
// skipped), and a reader that fails is started again with backoff.
func aggregate(ctx context.Context, st *dynamodb.Store, log *slog.Logger, cfg aggregatorConfig) {
	// One name for the process (kept across restarts of the reader after
	// errors), telling operators whose shard lease items they see.
	owner := leaseOwner()
	log.Info("aggregating usage from the stream", "table", st.Table(), "owner", owner, "lease", cfg.lease)
	if cfg.reconcile > 0 {
		r, err := reconcile.New(st, reconcile.WithInterval(cfg.reconcile), reconcile.WithLogger(log), reconcile.WithPrincipal("aggregator "+owner))
		if err != nil {
			log.Error("not reconciling leases", "err", err)
		} else {
			go func() { _ = r.Run(ctx) }()
		}
	}
	var changes int
	apply := func(ctx context.Context, batch []store.Change) error {
		err := aggregator.DefaultBackoff.Retry(ctx, func(ctx context.Context) error {
			return aggregator.Apply(ctx, st, batch, cfg.retention)
		}, func(err error, wait time.Duration) {
			log.Warn("writing usage; retrying the batch", "err", err, "in", wait)
		})
		if err == nil {
			changes += len(batch)
			log.Debug("usage written", "changes", len(batch), "total", changes)
		}
		return err
	}
	var stats stream.Stats
	opts := []stream.Option{stream.WithShardLease(cfg.lease), stream.WithShardLeaseOwner(owner),
		stream.WithLogger(log), stream.WithStats(&stats)}
	if cfg.upkeep {
		opts = append(opts, stream.WithUpkeep(stream.NewUpkeep(st)))
	}
	aggregator.DefaultBackoff.Restart(ctx, func(ctx context.Context) error {
		return stream.Read(ctx, st, cfg.poll, apply, opts...)
	}, func(err error, wait time.Duration) {
		log.Warn("reading the stream; starting again", "err", err, "in", wait)
	})
	log.Info("stopped", "changes", changes, "records", stats.Records.Load(),
		"split", stats.Split.Load(), "trimmed", stats.Trimmed.Load())
}

// leaseOwner names this process in the stream's shard lease items: host, pid
// and a random part, since hosts and pids repeat across containers.
func leaseOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
