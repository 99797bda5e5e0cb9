package dynamodb

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/limitertest"
)

// BenchmarkDynamoDBClientCPU measures the client's CPU of a warm acquire
// and commit (one rate limit, 1,000,000/s: full again before every
// acquire) against a raw conditional UpdateItem, each through a Store's
// SDK client, without DynamoDB's time: the keys are warmed on DynamoDB
// Local, then every call is answered at once by the HTTP transport with
// DynamoDB's last answer to it (the acquire's write: the item it met,
// ALL_OLD; the raw write: {}). What DynamoDB Local's share of the two
// cores (BenchmarkDynamoDB/own) and the machine's other load make noisy,
// this measures alone: the SDK's request building, signing and response
// decoding, and Tollgate's planning and reading of the item. Each
// goroutine acquires on a key of its own; the two alternate in 8 rounds
// (pairedThroughput: cpu-us, base-cpu-us, cpu-x).
func BenchmarkDynamoDBClientCPU(b *testing.B) {
	ctx := context.Background()
	tbl := newTable(b)
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines-%d", g), func(b *testing.B) {
			rt := &replayingRT{next: NewHTTPClient().Transport}
			cfg := localConfig(func(c *aws.Config) { c.HTTPClient = &http.Client{Transport: rt, Timeout: httpTimeout} })
			s := mustNew(b, cfg, tbl.table, nil, atLocal)
			lim, _ := limitertest.Planes(b, s, time.Second, tollgate.WithCacheTTL(24*time.Hour))
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
			prefix := uniquePrefix("cpu")
			acquire := func(w int) {
				le, err := lim.Acquire(ctx, prefix+strconv.Itoa(w), "api", tollgate.Consume{"rps": 1}, limits)
				if err != nil {
					b.Fatal(err)
				}
				if err := le.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			raws := make([]item, g)
			raw := func(w int) {
				if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: &tbl.table, Key: raws[w],
					UpdateExpression:          aws.String("ADD n :m"),
					ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
					ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
				}); err != nil {
					b.Fatal(err)
				}
			}
			for w := range g {
				raws[w] = item{attrPK: str(prefix + "raw" + strconv.Itoa(w)), attrSK: str(skState)}
				if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tbl.table,
					Item: item{attrPK: raws[w][attrPK], attrSK: raws[w][attrSK], "n": num(1 << 60)}}); err != nil {
					b.Fatal(err)
				}
				for range 3 {
					acquire(w)
					raw(w)
				}
			}
			rt.replay.Store(true)
			pairedThroughput(b, g, raw, acquire)
			// Calls of a kind not seen in the warm-up (none so far) go to
			// DynamoDB Local, and their wait is in the figures: say so.
			b.ReportMetric(float64(rt.passed.Load())/float64(b.N), "live-calls/op")
		})
	}
}

// replayingRT passes calls on until replay is set, remembering the last
// answer to each kind of call (its operation and its item's partition
// key); then it answers each call with the answer remembered for its
// kind, and passes on those of a kind it has not seen.
type replayingRT struct {
	next   http.RoundTripper
	replay atomic.Bool
	passed atomic.Int64 // calls passed on while replaying
	last   sync.Map     // kind -> []byte
}

func (r *replayingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	kind := req.Header.Get("X-Amz-Target") + " " + itemPK(body)
	if r.replay.Load() {
		if v, ok := r.last.Load(kind); ok {
			answer := v.([]byte)
			return &http.Response{
				StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {"replayed"},
					"Content-Length": {strconv.Itoa(len(answer))}},
				Body: io.NopCloser(bytes.NewReader(answer)), ContentLength: int64(len(answer)), Request: req,
			}, nil
		}
		r.passed.Add(1)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	r.last.Store(kind, answer)
	return resp, nil
}

// itemPK returns the partition key a request's JSON body names first.
func itemPK(body []byte) string {
	const pk = `"PK":{"S":"`
	i := bytes.Index(body, []byte(pk))
	if i < 0 {
		return ""
	}
	rest := body[i+len(pk):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}
