// Command tollgate-lambda is the stream aggregator (and the lease
// reconciler) of the DynamoDB backend as an AWS Lambda function: an event source mapping hands it the table's
// DynamoDB stream, batch by batch, and it adds what each bucket change
// consumed to the usage snapshots in the same table, exactly once, then
// splits the buckets the batch shows hot (stream.Upkeep): the work
// `tollgate aggregator` does as a process, with the same code. Both
// name a record's usage alike (stream.Source), so they are
// interchangeable: a record applied by one is skipped by the other.
//
// Build it with `make lambda` (dist/tollgate-lambda.zip, for the
// provided.al2023 runtime on arm64) and configure it with environment
// variables:
//
//	TOLLGATE_TABLE      the table (required)
//	TOLLGATE_RETENTION  how long snapshots are kept after their window ends,
//	                    as a Go duration (default 2160h, 90 days)
//	TOLLGATE_UPKEEP     "false" turns the splitting of hot buckets off
//	                    (default true, as tollgate aggregator --upkeep);
//	                    TOLLGATE_REFILL is its former name
//	TOLLGATE_MODE       "aggregate" (default): the stream's batches, as
//	                    above; "reconcile": the function is invoked on a
//	                    schedule (an EventBridge rule, e.g. rate(1 minute))
//	                    and ends the durable leases whose expiry has passed
//	                    (package reconcile), whatever the event says;
//	                    "events": an EventBridge rule hands it
//	                    infrastructure events, one per invocation, or an
//	                    SQS queue in batches (set ReportBatchItemFailures:
//	                    it answers with the messages to hand again), and
//	                    it releases the reservations they name (package
//	                    events)
//	TOLLGATE_EVENT_RULES
//	                    events mode: the rules, as YAML (package events;
//	                    required)
//	TOLLGATE_NAMESPACE  events mode: the namespace of the reservations
//	                    (default "default")
//	TOLLGATE_RECONCILE_INTERVAL
//	                    in aggregate mode, also reconcile after a batch when
//	                    this long has passed since this execution
//	                    environment last did (a Go duration, default 1m; 0
//	                    turns it off). Without stream traffic no batch
//	                    comes: schedule a reconcile function as well.
//
// TOLLGATE_LOOKAHEAD, which timed the proactive refill of earlier versions,
// is ignored: bucket items refill in every write's condition now.
//
// The region and credentials come from the standard AWS configuration
// chain (in Lambda: AWS_REGION and the function's execution role). The
// event source mapping needs a tumbling window (TumblingWindowInSeconds):
// only its events name the stream shard. See docs/aggregator.md, "Deploying
// as AWS Lambda".
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// config is what the environment says.
type config struct {
	table     string
	retention time.Duration
	upkeep    bool
	mode      string        // "aggregate", "reconcile" or "events"
	reconcile time.Duration // aggregate mode: reconcile after a batch this often; 0: never
	rules     *events.Config
	namespace string
}

// defaultReconcileInterval is TOLLGATE_RECONCILE_INTERVAL's default.
const defaultReconcileInterval = time.Minute

// configFrom reads the configuration through getenv (os.Getenv).
func configFrom(getenv func(string) string) (config, error) {
	c := config{table: getenv("TOLLGATE_TABLE"), retention: aggregator.DefaultRetention, upkeep: true,
		mode: "aggregate", reconcile: defaultReconcileInterval}
	if c.table == "" {
		return c, errors.New("TOLLGATE_TABLE is not set: name the Tollgate table")
	}
	if v := getenv("TOLLGATE_RETENTION"); v != "" {
		x, err := time.ParseDuration(v)
		if err != nil || x <= 0 {
			return c, fmt.Errorf("TOLLGATE_RETENTION=%q: want a positive Go duration, e.g. 2160h", v)
		}
		c.retention = x
	}
	for _, name := range []string{"TOLLGATE_REFILL", "TOLLGATE_UPKEEP"} { // the later name wins
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("%s=%q: want true or false", name, v)
			}
			c.upkeep = b
		}
	}
	switch v := getenv("TOLLGATE_MODE"); v {
	case "", "aggregate":
	case "reconcile":
		c.mode = v
	case "events":
		c.mode = v
		rules, err := events.ParseConfig([]byte(getenv("TOLLGATE_EVENT_RULES")))
		if err != nil {
			return c, fmt.Errorf("TOLLGATE_EVENT_RULES: %w", err)
		}
		c.rules, c.namespace = rules, cmp.Or(getenv("TOLLGATE_NAMESPACE"), tollgate.DefaultNamespace)
	default:
		return c, fmt.Errorf("TOLLGATE_MODE=%q: want aggregate, reconcile or events", v)
	}
	if v := getenv("TOLLGATE_RECONCILE_INTERVAL"); v != "" {
		x, err := time.ParseDuration(v)
		if err != nil || x < 0 {
			return c, fmt.Errorf("TOLLGATE_RECONCILE_INTERVAL=%q: want a Go duration, e.g. 1m, or 0 for never", v)
		}
		c.reconcile = x
	}
	return c, nil
}

// initTimeout bounds connecting at a cold start (Lambda allows 10 s).
const initTimeout = 8 * time.Second

func main() {
	log.SetFlags(0)
	log.SetPrefix("tollgate-lambda: ")
	cfg, err := configFrom(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	st, err := dynamodb.Connect(ctx, dynamodb.ConnectConfig{Table: cfg.table})
	if err == nil {
		err = st.Admin().CheckTable(ctx)
	}
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var r *reconcile.Reconciler
	if cfg.mode == "reconcile" || cfg.reconcile > 0 {
		if r, err = reconcile.New(st, reconcile.WithLogger(logger), reconcile.WithPrincipal(principal)); err != nil {
			log.Fatal(err)
		}
	}
	switch cfg.mode {
	case "reconcile":
		lambda.Start((&reconcileHandler{r: r, log: logger}).handle)
		return
	case "events":
		h, err := newEventsHandler(st, cfg, logger)
		if err != nil {
			log.Fatal(err)
		}
		lambda.Start(h.handle)
		return
	}
	h := &handler{usage: st, retention: cfg.retention, log: logger, reconciler: r, reconcileEvery: cfg.reconcile,
		mark: markAs(st, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))}
	if cfg.upkeep {
		h.upkeep = stream.NewUpkeep(st)
	}
	lambda.Start(h.handle)
}

// markAs writes the aggregator's mark in st's table, naming the function.
func markAs(st *dynamodb.Store, function string) func(context.Context) error {
	return func(ctx context.Context) error {
		return stream.WriteAggregatorMark(ctx, st, "tollgate-lambda "+function)
	}
}
