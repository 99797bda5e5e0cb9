// Command tollgate-lambda is the stream aggregator of the DynamoDB backend
// as an AWS Lambda function: an event source mapping hands it the table's
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
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// config is what the environment says.
type config struct {
	table     string
	retention time.Duration
	upkeep    bool
}

// configFrom reads the configuration through getenv (os.Getenv).
func configFrom(getenv func(string) string) (config, error) {
	c := config{table: getenv("TOLLGATE_TABLE"), retention: aggregator.DefaultRetention, upkeep: true}
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
		err = st.CheckTable(ctx)
	}
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	h := &handler{usage: st, retention: cfg.retention, log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	if cfg.upkeep {
		h.upkeep = stream.NewUpkeep(st)
	}
	lambda.Start(h.handle)
}
