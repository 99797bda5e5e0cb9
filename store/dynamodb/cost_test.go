package dynamodb

// Cost accounting of the DynamoDB backend (docs/dynamodb.md 5, "Cost per
// operation": no operation may cost more than its budget): every test counts the API calls each
// operation makes, per operation name, through an SDK middleware, and
// compares them exactly with the budget. DynamoDB Local does not report
// consumed capacity faithfully for transactions, so calls are what is
// counted (docs/dynamodb.md 9).
//
// The instrumentation (a counting middleware and an HTTP transport that
// counts attempts and can inject faults, see faults_test.go) is shared with
// the fault tests.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
)

// sdkAttempts is how often an instrumented client tries one API call (the
// SDK's retryer: transport errors, 5xx and throttling are retried).
const sdkAttempts = 3

// sdkBackoff is the instrumented clients' delay between SDK attempts.
const sdkBackoff = time.Millisecond

// instrEpoch is where the fake clocks of these tests start.
var instrEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// opCounter counts API calls per operation name (UpdateItem, GetItem, ...):
// one per call, however many attempts the SDK makes.
type opCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func newOpCounter() *opCounter { return &opCounter{calls: map[string]int{}} }

// apiOption installs the counter in a client's middleware stack. It sits in
// the Initialize step, after the operation's metadata is registered and
// before the retry loop, so it sees each call once.
func (c *opCounter) apiOption(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("TollgateTestCountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.calls[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// take returns the calls counted since the last take and resets the counter.
func (c *opCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = map[string]int{}
	return m
}

// formatCalls prints a call count map in a stable order.
func formatCalls(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// expectCalls fails unless got has exactly the calls of want (nil: none).
func expectCalls(t testing.TB, what string, got, want map[string]int) {
	t.Helper()
	if formatCalls(got) != formatCalls(want) {
		t.Errorf("%s: API calls %s, want exactly %s", what, formatCalls(got), formatCalls(want))
	}
}

// expectCallCount fails unless got has n calls in all, each a GetItem or
// an UpdateItem (single-item calls: no batch, no transaction).
func expectCallCount(t testing.TB, what string, got map[string]int, n int) {
	t.Helper()
	if got["GetItem"]+got["UpdateItem"] != n || len(got) > 2 || len(got) == 2 && (got["GetItem"] == 0 || got["UpdateItem"] == 0) {
		t.Errorf("%s: API calls %s, want %d GetItem or UpdateItem in all", what, formatCalls(got), n)
	}
}

// testTable is a table of DynamoDB Local shared by the instrumented stores
// of one test.
type testTable struct {
	admin *Store // a plain client, for inspection outside the counted calls
}

func newTestTable(t testing.TB) *testTable { return &testTable{admin: newTable(t)} }

// instrumented is a Store whose client counts calls (calls) and attempts
// and injects faults (net).
type instrumented struct {
	*Store
	calls *opCounter
	net   *faultTransport
}

// client returns a new Store on the table, with its own client, counter,
// transport and memory of known buckets (so a new client is a cold one).
// attemptTimeout is the HTTP client's timeout, which bounds each SDK attempt.
// The SDK retryer makes sdkAttempts attempts sdkBackoff apart.
func (tt *testTable) client(t testing.TB, attemptTimeout time.Duration, opts ...Option) *instrumented {
	ft := newFaultTransport()
	t.Cleanup(ft.base.CloseIdleConnections)
	calls := newOpCounter()
	hc := &http.Client{Transport: ft, Timeout: attemptTimeout}
	s := mustNew(t, localConfig(func(c *aws.Config) { c.HTTPClient = hc }), tt.admin.Table(),
		append([]Option{WithoutStreams()}, opts...), atLocal,
		func(o *dynamodb.Options) {
			o.APIOptions = append(o.APIOptions, calls.apiOption)
			o.RetryMaxAttempts = 0
			o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = sdkAttempts
				so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return sdkBackoff, nil })
				so.RateLimiter = ratelimit.None // never refuse a retry for lack of retry tokens
			})
		})
	return &instrumented{Store: s, calls: calls, net: ft}
}

// rate100 is 100 tokens a minute, burst 100, in the store's units.
var rate100 = bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000}

// rate2 is 2 tokens a minute, burst 2.
var rate2 = bucket.Params{Capacity: 2_000, Amount: 2_000, Period: 60_000}

// consumeReq debits amount millitokens of limit "rpm" with parameters p from
// each of keys, all or nothing.
func consumeReq(now int64, p bucket.Params, amount int64, keys ...store.BucketKey) *store.ConsumeRequest {
	req := &store.ConsumeRequest{Now: now}
	for _, k := range keys {
		req.Buckets = append(req.Buckets, store.BucketRequest{Key: k, Limits: []store.LimitRequest{
			{Name: "rpm", Params: p, Check: true, Amount: amount},
		}})
	}
	return req
}

// mustConsume runs req through s and returns whether it was granted.
func mustConsume(t testing.TB, s store.Buckets, ns string, req *store.ConsumeRequest) bool {
	t.Helper()
	ok, err := s.Consume(context.Background(), ns, req)
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	return ok
}

// balanceAt returns limit's balance in bucket k at now (after refill),
// read through s; it fails the test if the bucket or limit does not exist.
func balanceAt(t testing.TB, s *Store, ns string, k store.BucketKey, limit string, now int64) int64 {
	t.Helper()
	recs, err := s.ReadBuckets(context.Background(), ns, []store.BucketKey{k})
	if err != nil {
		t.Fatalf("ReadBuckets: %v", err)
	}
	if recs[0] == nil {
		t.Fatalf("bucket %v does not exist", k)
	}
	j := recs[0].Find(limit)
	if j < 0 {
		t.Fatalf("bucket %v has no limit %s", k, limit)
	}
	l := recs[0].Limits[j]
	return bucket.Refill(l.State, l.Params, now-recs[0].Refilled).Tokens
}

// itemTokens returns limit's balance at now in one stored item (a shard),
// as its image gives it.
func itemTokens(t testing.TB, it item, limit string, now int64) int64 {
	t.Helper()
	img, err := itemImage(it)
	if err != nil {
		t.Fatal(err)
	}
	j := img.find(limit)
	if j < 0 {
		t.Fatalf("item has no limit %s", limit)
	}
	return img.stateAt(&img.limits[j], now).Tokens
}

// TestCostSingleBucket walks one bucket through every single-bucket write
// path and counts the calls of each step. None uses a transaction.
func TestCostSingleBucket(t *testing.T) {
	tt := newTestTable(t)
	const ns = "cost1"
	t0 := instrEpoch.UnixMilli()
	a := store.BucketKey{Entity: "a", Resource: "r"}
	b := store.BucketKey{Entity: "b", Resource: "r"}
	c1 := tt.client(t, 5*time.Second)

	// A new bucket: the write that assumes an unseen item full finds none,
	// and one conditional put creates it with the debit.
	t.Run("create", func(t *testing.T) {
		c1.calls.take()
		if !mustConsume(t, c1, ns, consumeReq(t0, rate100, 1_000, a)) {
			t.Fatal("a new bucket refused 1 of 100")
		}
		expectCalls(t, "creating a bucket", c1.calls.take(), map[string]int{"UpdateItem": 1, "PutItem": 1})
		if got := balanceAt(t, tt.admin, ns, a, "rpm", t0); got != 99_000 {
			t.Errorf("balance after create = %d, want 99000", got)
		}
	})

	// Reading one bucket (available, statuses): one consistent GetItem.
	t.Run("read one bucket", func(t *testing.T) {
		c1.calls.take()
		recs, err := c1.ReadBuckets(context.Background(), ns, []store.BucketKey{a})
		if err != nil || recs[0] == nil {
			t.Fatalf("ReadBuckets: %v %v", recs, err)
		}
		expectCalls(t, "reading one bucket", c1.calls.take(), map[string]int{"GetItem": 1})
		if _, err := c1.ReadBuckets(context.Background(), ns, []store.BucketKey{a, b}); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, "reading two buckets", c1.calls.take(), map[string]int{"BatchGetItem": 1})
	})

	// A known bucket below capacity: one UpdateItem, no read.
	t.Run("warm, below capacity", func(t *testing.T) {
		req := consumeReq(t0, rate100, 1_000, a)
		if !mustConsume(t, c1, ns, req) {
			t.Fatal("refused")
		}
		expectCalls(t, "warm acquire", c1.calls.take(), map[string]int{"UpdateItem": 1})
		if got := req.Buckets[0].Limits[0].Observed.Tokens; got != 99_000 {
			t.Errorf("Observed = %d, want 99000 (the balance before the debit)", got)
		}
		// Later, with refill pending (credit of 600 ms = 1 token; still
		// below capacity), one write still suffices and the balance is
		// exact: 98 + 1 refilled - 1 = 98.
		req = consumeReq(t0+600, rate100, 1_000, a)
		if !mustConsume(t, c1, ns, req) {
			t.Fatal("refused")
		}
		expectCalls(t, "warm acquire with refill pending", c1.calls.take(), map[string]int{"UpdateItem": 1})
		if got := req.Buckets[0].Limits[0].Observed.Tokens; got != 99_000 {
			t.Errorf("Observed = %d, want 99000 (98 + 1 refilled)", got)
		}
		if got := balanceAt(t, tt.admin, ns, a, "rpm", t0+600); got != 98_000 {
			t.Errorf("balance = %d, want 98000", got)
		}
	})

	// An empty bucket whose refill cannot help by now: the image refuses
	// the request, and one consistent read confirms it (another process
	// may have given tokens back); no write.
	t.Run("refusal", func(t *testing.T) {
		if !mustConsume(t, c1, ns, consumeReq(t0, rate2, 2_000, b)) {
			t.Fatal("a new bucket refused its whole capacity")
		}
		c1.calls.take()
		req := consumeReq(t0, rate2, 1_000, b)
		if mustConsume(t, c1, ns, req) {
			t.Fatal("granted 1 token from an empty bucket")
		}
		expectCalls(t, "refusal", c1.calls.take(), map[string]int{"GetItem": 1})
		if got := req.Buckets[0].Limits[0].Observed.Tokens; got != 0 {
			t.Errorf("Observed = %d, want 0", got)
		}
	})

	// An empty bucket that refill has partly refilled: the write's
	// condition includes the refill, so one write debits it.
	t.Run("empty, refill helps", func(t *testing.T) {
		req := consumeReq(t0+30_000, rate2, 1_000, b) // 30 s refill 1 token
		if !mustConsume(t, c1, ns, req) {
			t.Fatal("refused although 30 s refilled 1 token")
		}
		expectCalls(t, "refilled empty bucket", c1.calls.take(), map[string]int{"UpdateItem": 1})
		if got := balanceAt(t, tt.admin, ns, b, "rpm", t0+30_000); got != 0 {
			t.Errorf("balance = %d, want 0", got)
		}
	})

	// A known bucket that refill has brought back to capacity (an idle
	// entity): the write sets its full tick afresh, on condition that it
	// is full: one write.
	t.Run("full bucket", func(t *testing.T) {
		req := consumeReq(t0+10*60_000, rate100, 1_000, a)
		if !mustConsume(t, c1, ns, req) {
			t.Fatal("refused")
		}
		expectCalls(t, "full known bucket", c1.calls.take(), map[string]int{"UpdateItem": 1})
		if got := balanceAt(t, tt.admin, ns, a, "rpm", t0+10*60_000); got != 99_000 {
			t.Errorf("balance = %d, want 99000", got)
		}
	})

	t1 := t0 + 10*60_000
	t2 := t1 + 60_000

	// A second client has never seen the bucket: it assumes it full.
	// Right (99 of 100 at t1, full again a minute later): one write.
	// Wrong (b is empty): the failed write returns the item, and the write
	// from it succeeds: two. Then it knows both.
	t.Run("cold store", func(t *testing.T) {
		c2 := tt.client(t, 5*time.Second)
		if !mustConsume(t, c2, ns, consumeReq(t2, rate100, 1_000, a)) {
			t.Fatal("refused")
		}
		expectCalls(t, "cold store, full bucket", c2.calls.take(), map[string]int{"UpdateItem": 1})
		if !mustConsume(t, c2, ns, consumeReq(t2, rate100, 1_000, a)) {
			t.Fatal("refused")
		}
		expectCalls(t, "same store, now warm", c2.calls.take(), map[string]int{"UpdateItem": 1})
		if got := balanceAt(t, tt.admin, ns, a, "rpm", t2); got != 98_000 {
			t.Errorf("balance = %d, want 98000", got)
		}
		if !mustConsume(t, c2, ns, consumeReq(t0+60_000, rate2, 1_000, b)) {
			t.Fatal("refused although 30 s more refilled 1 token")
		}
		expectCalls(t, "cold store, bucket not full", c2.calls.take(), map[string]int{"UpdateItem": 2})
	})

	// A read (Available) warms the image as a write does: the acquire that
	// follows, on a bucket that is not full, is one write.
	t.Run("read warms", func(t *testing.T) {
		c4 := tt.client(t, 5*time.Second)
		if _, err := c4.ReadBuckets(context.Background(), ns, []store.BucketKey{b}); err != nil {
			t.Fatal(err)
		}
		c4.calls.take()
		if !mustConsume(t, c4, ns, consumeReq(t0+90_000, rate2, 1_000, b)) {
			t.Fatal("refused although 30 s more refilled 1 token")
		}
		expectCalls(t, "acquire after a read, bucket not full", c4.calls.take(), map[string]int{"UpdateItem": 1})
	})

	// Speculation off: every acquire reads first.
	t.Run("speculation off", func(t *testing.T) {
		c3 := tt.client(t, 5*time.Second, WithSpeculative(false))
		for i := range 2 {
			if !mustConsume(t, c3, ns, consumeReq(t2, rate100, 1_000, a)) {
				t.Fatal("refused")
			}
			expectCalls(t, fmt.Sprintf("slow path, acquire %d", i+1), c3.calls.take(), map[string]int{"GetItem": 1, "UpdateItem": 1})
		}
		d := store.BucketKey{Entity: "d", Resource: "r"}
		if !mustConsume(t, c3, ns, consumeReq(t2, rate2, 2_000, d)) {
			t.Fatal("refused")
		}
		expectCalls(t, "slow path, create", c3.calls.take(), map[string]int{"GetItem": 1, "PutItem": 1})
		if mustConsume(t, c3, ns, consumeReq(t2, rate2, 1_000, d)) {
			t.Fatal("granted from an empty bucket")
		}
		expectCalls(t, "slow path, rejection", c3.calls.take(), map[string]int{"GetItem": 1})
		if got := balanceAt(t, tt.admin, ns, a, "rpm", t2); got != 96_000 {
			t.Errorf("balance = %d, want 96000", got)
		}
	})
}

// TestCostCalendarQuota: a calendar quota costs what a rate limit does:
// one UpdateItem per warm acquire, in its window and across a boundary,
// and a refusal one GetItem.
func TestCostCalendarQuota(t *testing.T) {
	tt := newTestTable(t)
	const ns = "costq"
	daily := bucket.Params{Capacity: 3_000, Amount: 3_000, Period: 1, Window: calendar.Window{Unit: calendar.Day, Zone: "Europe/Berlin"}}
	t0 := instrEpoch.UnixMilli() // 13:00 in Berlin
	a := store.BucketKey{Entity: "a", Resource: "r"}
	c1 := tt.client(t, 5*time.Second)
	if !mustConsume(t, c1, ns, consumeReq(t0, daily, 1_000, a)) {
		t.Fatal("a new quota refused 1 of 3")
	}
	c1.calls.take()
	for i, at := range []int64{t0 + 1_000, t0 + 11*3_600_000 - 1} {
		if !mustConsume(t, c1, ns, consumeReq(at, daily, 1_000, a)) {
			t.Fatalf("acquire %d refused", i)
		}
		expectCalls(t, "warm quota acquire", c1.calls.take(), map[string]int{"UpdateItem": 1})
	}
	if mustConsume(t, c1, ns, consumeReq(t0+11*3_600_000-1, daily, 1_000, a)) {
		t.Fatal("granted a fourth token in one day")
	}
	expectCalls(t, "quota refusal", c1.calls.take(), map[string]int{"GetItem": 1})
	midnight := t0 + 11*3_600_000 // 00:00 in Berlin
	req := consumeReq(midnight, daily, 3_000, a)
	if !mustConsume(t, c1, ns, req) {
		t.Fatal("refused the next day's whole quota")
	}
	expectCalls(t, "quota acquire across a boundary", c1.calls.take(), map[string]int{"UpdateItem": 1})
	if got := req.Buckets[0].Limits[0].Observed.Tokens; got != 3_000 {
		t.Errorf("Observed at midnight = %d, want 3000", got)
	}
}

// TestCostCascade counts the calls of two-bucket (cascade) requests.
func TestCostCascade(t *testing.T) {
	tt := newTestTable(t)
	const ns = "cost2"
	t0 := instrEpoch.UnixMilli()
	child := store.BucketKey{Entity: "key", Resource: "r"}
	parent := store.BucketKey{Entity: "org", Resource: "r"}
	c1 := tt.client(t, 5*time.Second)
	balances := func(t *testing.T, want int64) {
		t.Helper()
		for _, k := range []store.BucketKey{child, parent} {
			if got := balanceAt(t, tt.admin, ns, k, "rpm", t0); got != want {
				t.Errorf("balance of %s = %d, want %d", k.Entity, got, want)
			}
		}
	}

	// New buckets: each assumed full, found missing, created, in parallel.
	t.Run("cold create", func(t *testing.T) {
		if !mustConsume(t, c1, ns, consumeReq(t0, rate100, 1_000, child, parent)) {
			t.Fatal("refused")
		}
		expectCalls(t, "cold cascade creating both buckets", c1.calls.take(), map[string]int{"UpdateItem": 2, "PutItem": 2})
		balances(t, 99_000)
	})

	// Both buckets known: two writes, sent in parallel (the transport
	// holds the first until the second arrives), no read, no transaction.
	t.Run("warm parallel", func(t *testing.T) {
		rv := c1.net.gather("UpdateItem", 2, 5*time.Second)
		ok := mustConsume(t, c1, ns, consumeReq(t0, rate100, 1_000, child, parent))
		arrived, missed := c1.net.stopGather(rv)
		if !ok {
			t.Fatal("refused")
		}
		expectCalls(t, "warm cascade", c1.calls.take(), map[string]int{"UpdateItem": 2})
		if arrived != 2 || missed != 0 {
			t.Errorf("the two writes were not in flight together (%d arrived, %d waited in vain)", arrived, missed)
		}
		balances(t, 98_000)
	})

	// A client that has not seen the buckets assumes them full; they are
	// not, so each write fails and returns its item, and the write from it
	// succeeds; then it knows them.
	t.Run("cold existing", func(t *testing.T) {
		c2 := tt.client(t, 5*time.Second)
		if !mustConsume(t, c2, ns, consumeReq(t0, rate100, 1_000, child, parent)) {
			t.Fatal("refused")
		}
		expectCalls(t, "cold cascade, existing buckets not full", c2.calls.take(), map[string]int{"UpdateItem": 4})
		if !mustConsume(t, c2, ns, consumeReq(t0, rate100, 1_000, child, parent)) {
			t.Fatal("refused")
		}
		expectCalls(t, "same client, now warm", c2.calls.take(), map[string]int{"UpdateItem": 2})
		balances(t, 96_000)
	})

	t.Run("speculation off", func(t *testing.T) {
		c3 := tt.client(t, 5*time.Second, WithSpeculative(false))
		for range 2 {
			if !mustConsume(t, c3, ns, consumeReq(t0, rate100, 1_000, child, parent)) {
				t.Fatal("refused")
			}
			expectCalls(t, "cascade, speculation off", c3.calls.take(), map[string]int{"BatchGetItem": 1, "TransactWriteItems": 1})
		}
		balances(t, 94_000)
	})

	// The parent is exhausted: the child's write succeeds; the parent's
	// image refuses, which one read confirms; the child's debit is given
	// back (one more UpdateItem) and the request is refused, with no
	// transaction.
	t.Run("warm rejection compensated", func(t *testing.T) {
		k := store.BucketKey{Entity: "key2", Resource: "r"}
		o := store.BucketKey{Entity: "org2", Resource: "r"}
		req := func(amount int64) *store.ConsumeRequest {
			return &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{
				{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: rate100, Check: true, Amount: amount}}},
				{Key: o, Limits: []store.LimitRequest{{Name: "rpm", Params: rate2, Check: true, Amount: amount}}},
			}}
		}
		for range 2 {
			if !mustConsume(t, c1, ns, req(1_000)) {
				t.Fatal("refused")
			}
		}
		c1.calls.take()
		if mustConsume(t, c1, ns, req(1_000)) {
			t.Fatal("granted although the parent is empty")
		}
		expectCalls(t, "warm cascade refused by the parent", c1.calls.take(), map[string]int{"UpdateItem": 2, "GetItem": 1})
		if got := balanceAt(t, tt.admin, ns, k, "rpm", t0); got != 98_000 {
			t.Errorf("child balance = %d, want 98000 (the compensated debit given back)", got)
		}
		if got := balanceAt(t, tt.admin, ns, o, "rpm", t0); got != 0 {
			t.Errorf("parent balance = %d, want 0", got)
		}
	})
}

// limiterEnv is a limiter with a frozen fake clock over an instrumented
// store. It reads the change generation once, at its first call, and not
// again within a test: the poll goes by the wall clock (once a second by
// default, its own row in docs/dynamodb.md 5), and a poll falling inside
// a counted step, on a slow machine, would see the generation the test's
// own setup raised and count the lookups of the caches it drops.
type limiterEnv struct {
	c   *instrumented
	lim *tollgate.Limiter
	adm *tollgate.Admin // shares lim's change watch, so its writes drop lim's caches at once
	clk *clock.Fake
}

func newLimiterEnv(t testing.TB, c *instrumented) *limiterEnv {
	t.Helper()
	clk := clock.NewFake(instrEpoch)
	lim, adm := limitertest.Planes(t, c.Store, time.Hour, tollgate.WithClock(clk), tollgate.WithRefreshInterval(time.Hour))
	return &limiterEnv{c: c, lim: lim, adm: adm, clk: clk}
}

// cascadePair creates parent and child (cascading to parent).
func (e *limiterEnv) cascadePair(t testing.TB, parent, child string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.adm.CreateEntity(ctx, tollgate.Entity{ID: parent}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.CreateEntity(ctx, tollgate.Entity{ID: child, ParentID: parent, Cascade: true}); err != nil {
		t.Fatal(err)
	}
}

func (e *limiterEnv) acquire(t testing.TB, entity, resource string, consume tollgate.Consume, opts ...tollgate.AcquireOption) *tollgate.Lease {
	t.Helper()
	le, err := e.lim.Acquire(context.Background(), entity, resource, consume, opts...)
	if err != nil {
		t.Fatalf("Acquire %s/%s: %v", entity, resource, err)
	}
	return le
}

// available returns every limit's available tokens for entity (and its
// cascade ancestors), keyed "entity/limit".
func (e *limiterEnv) available(t testing.TB, entity, resource string, opts ...tollgate.AcquireOption) map[string]int64 {
	t.Helper()
	sts, err := e.lim.Available(context.Background(), entity, resource, opts...)
	if err != nil {
		t.Fatalf("Available %s/%s: %v", entity, resource, err)
	}
	m := map[string]int64{}
	for _, s := range sts {
		m[s.Entity+"/"+s.Limit] = s.Available
	}
	return m
}

func expectAvailable(t testing.TB, what string, got, want map[string]int64) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: available %v, want %v", what, got, want)
	}
}

// TestCostLimiterLease counts the store calls of whole leases through the
// limiter (explicit limits, warm config cache): acquire, commit with and
// without adjustments, rollback, for a single bucket and a two-level cascade.
func TestCostLimiterLease(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	e := newLimiterEnv(t, tt.client(t, 5*time.Second))
	e.cascadePair(t, "org", "key")
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000))
	one := tollgate.Consume{"rpm": 1, "tpm": 100}

	// Warm the limiter's caches (namespace, entities, system mode) and
	// create the buckets.
	for _, id := range []string{"key", "solo"} {
		if err := e.acquire(t, id, "llm", one, limits).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.c.calls.take()

	step := func(what string, want map[string]int, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		expectCalls(t, what, e.c.calls.take(), want)
	}
	var le *tollgate.Lease
	acquire := func(id string) func() error {
		return func() error {
			var err error
			le, err = e.lim.Acquire(ctx, id, "llm", one, limits)
			return err
		}
	}
	commit := func() error { return le.Commit(ctx) }
	rollback := func() error { return le.Rollback(ctx) }
	adjustCommit := func() error {
		if err := le.Adjust(ctx, tollgate.Consume{"tpm": 50}); err != nil {
			return err
		}
		return le.Commit(ctx)
	}

	step("single-bucket acquire", map[string]int{"UpdateItem": 1}, acquire("solo"))
	step("single-bucket commit with an adjustment", map[string]int{"UpdateItem": 1}, adjustCommit)
	step("single-bucket acquire", map[string]int{"UpdateItem": 1}, acquire("solo"))
	step("single-bucket commit without adjustments", nil, commit)

	step("warm cascade acquire", map[string]int{"UpdateItem": 2}, acquire("key"))
	step("cascade commit with an adjustment", map[string]int{"UpdateItem": 2}, adjustCommit)
	step("warm cascade acquire", map[string]int{"UpdateItem": 2}, acquire("key"))
	step("cascade commit without adjustments", nil, commit)

	// Rollbacks last: a refund pushes the bucket's full-time bound into the
	// past, which stops speculation until the next guarded write.
	step("single-bucket acquire", map[string]int{"UpdateItem": 1}, acquire("solo"))
	step("single-bucket rollback", map[string]int{"UpdateItem": 1}, rollback)
	step("warm cascade acquire", map[string]int{"UpdateItem": 2}, acquire("key"))
	step("cascade rollback", map[string]int{"UpdateItem": 2}, rollback)

	// Measured, not budgeted: the first acquire after a refund.
	if err := acquire("key")(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cascade acquire right after a rollback: %s", formatCalls(e.c.calls.take()))
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Every step was applied exactly once: warm-up 1 + 2 committed + 1
	// after the rollback (rpm); tpm 100 each plus the adjustments of 50.
	expectAvailable(t, "cascade balances", e.available(t, "key", "llm", limits), map[string]int64{
		"key/rpm": 96, "key/tpm": 10_000 - 400 - 50, "org/rpm": 96, "org/tpm": 10_000 - 400 - 50,
	})
	expectAvailable(t, "single balances", e.available(t, "solo", "llm", limits), map[string]int64{
		"solo/rpm": 97, "solo/tpm": 10_000 - 300 - 50,
	})
}

// TestCostConcurrencyRelease: a lease that holds concurrency tokens is
// durable through the limiter: its acquire is one TransactWriteItems (the
// buckets' debits and the lease record), and its commit another (the record
// deleted, the tokens returned), even without adjustments: one call each
// for a cascade, where a lease held in memory alone took one UpdateItem per
// bucket each way.
func TestCostConcurrencyRelease(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	e := newLimiterEnv(t, tt.client(t, 5*time.Second))
	e.cascadePair(t, "org", "key")
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("jobs", 10), tollgate.PerMinute("rpm", 100))
	one := tollgate.Consume{"jobs": 1, "rpm": 1}
	if err := e.acquire(t, "key", "batch", one, limits).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.c.calls.take()

	le := e.acquire(t, "key", "batch", one, limits)
	expectCalls(t, "warm cascade acquire with a concurrency limit", e.c.calls.take(), map[string]int{"TransactWriteItems": 1})
	expectAvailable(t, "while held", e.available(t, "key", "batch", limits), map[string]int64{
		"key/jobs": 9, "key/rpm": 98, "org/jobs": 9, "org/rpm": 98,
	})
	e.c.calls.take()
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "commit returning concurrency tokens", e.c.calls.take(), map[string]int{"TransactWriteItems": 1})
	expectAvailable(t, "after commit", e.available(t, "key", "batch", limits), map[string]int64{
		"key/jobs": 10, "key/rpm": 98, "org/jobs": 10, "org/rpm": 98,
	})
}

// A durable lease is written with its debits in one transaction, and ended
// with their give-back in one: a warm leased acquire or ending is one call,
// for one bucket or a cascade (docs/dynamodb.md 4.13).
func TestCostLeases(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	c := tt.client(t, 5*time.Second)
	ns := "cost-leases"
	slots := bucket.Params{Capacity: 10_000}
	leased := func(id string, keys ...store.BucketKey) *store.ConsumeRequest {
		req := &store.ConsumeRequest{Now: instrEpoch.UnixMilli()}
		for _, k := range keys {
			req.Buckets = append(req.Buckets, store.BucketRequest{Key: k, Limits: []store.LimitRequest{
				{Name: "jobs", Params: slots, Check: true, Amount: 1000},
				{Name: "rpm", Params: rate100, Check: true, Amount: 1000},
			}})
		}
		req.Lease = store.NewLeaseRecord(id, "cost", req, req.Now+60_000)
		return req
	}
	end := func(req *store.ConsumeRequest) {
		t.Helper()
		err := c.EndLease(ctx, ns, store.LeaseEnding{ID: req.Lease.ID, Version: 1, Deltas: req.Lease.EndDeltas(store.Commit)})
		if err != nil {
			t.Fatalf("EndLease: %v", err)
		}
	}
	key, org := store.BucketKey{Entity: "key", Resource: "batch"}, store.BucketKey{Entity: "org", Resource: "batch"}
	cases := []struct {
		name      string
		keys      []store.BucketKey
		acq, ends map[string]int
	}{
		{"cold bucket", []store.BucketKey{key}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, map[string]int{"TransactWriteItems": 1}},
		{"warm bucket", []store.BucketKey{key}, map[string]int{"TransactWriteItems": 1}, map[string]int{"TransactWriteItems": 1}},
		{"cold cascade", []store.BucketKey{{Entity: "k2", Resource: "batch"}, org}, map[string]int{"BatchGetItem": 1, "TransactWriteItems": 1}, map[string]int{"TransactWriteItems": 1}},
		{"warm cascade", []store.BucketKey{key, org}, map[string]int{"TransactWriteItems": 1}, map[string]int{"TransactWriteItems": 1}},
	}
	for i, tc := range cases {
		c.calls.take()
		req := leased(fmt.Sprintf("%032x", i+1), tc.keys...)
		if !mustConsume(t, c, ns, req) {
			t.Fatalf("%s: denied", tc.name)
		}
		expectCalls(t, tc.name+": acquire", c.calls.take(), tc.acq)
		end(req)
		expectCalls(t, tc.name+": end", c.calls.take(), tc.ends)
	}
	if got := balanceAt(t, c.Store, ns, org, "jobs", instrEpoch.UnixMilli()); got != 10_000 {
		t.Errorf("org jobs after every lease ended = %d, want 10000", got)
	}
}

// Lease tombstones (docs/dynamodb.md 4.13, "Tombstones"): the calls and
// the transaction items of each form, warm. An ending that keeps a
// tombstone is the same one call with one more item (its Put); a reused
// id adds a ConditionCheck to its acquire; a lease resumed open is one
// GetItem, ended two; an ender that never saw the record reads it first.
func TestCostTombstones(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	calls, capture := newOpCounter(), &txCapture{}
	s := mustNew(t, localConfig(), tt.admin.Table(), []Option{WithoutStreams()}, atLocal, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.apiOption, capture.apiOption)
	})
	const ns = "cost-tombstones"
	now := instrEpoch.UnixMilli()
	k := store.BucketKey{Entity: "job", Resource: "batch"}
	n := 0
	leased := func(reused, bornEnded bool) *store.ConsumeRequest {
		n++
		req := &store.ConsumeRequest{Now: now, ReusedID: reused, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
			{Name: "jobs", Params: bucket.Params{Capacity: 100_000}, Check: true, Amount: 1000},
		}}}}
		req.Lease = store.NewLeaseRecord(fmt.Sprintf("%032x", n), "cost", req, now+60_000)
		if bornEnded {
			req.Lease.EndedAt, req.Lease.EndedAs, req.Lease.KeepUntil = now, store.Commit, now+600_000
		}
		return req
	}
	// end ends rec keeping its tombstone keep ms (0: none); the ender
	// passes the record unless unseen says it never saw it.
	end := func(st *Store, rec *store.LeaseRecord, keep int64, unseen bool) func() error {
		return func() error {
			e := store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(store.Commit), As: store.Commit, At: now}
			if keep > 0 {
				e.KeepUntil = now + keep
			}
			if !unseen {
				e.Record = rec
			}
			return st.EndLease(ctx, ns, e)
		}
	}
	acquire := func(req *store.ConsumeRequest) func() error {
		return func() error {
			if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
				return fmt.Errorf("Consume = %v, %v", ok, err)
			}
			return nil
		}
	}
	resume := func(id string) func() error {
		return func() error { _, err := s.GetLease(ctx, ns, id); return err }
	}
	// step runs fn and checks its calls and, if items > 0, that it sent
	// one transaction of that many items.
	step := func(what string, want map[string]int, items int, fn func() error) {
		t.Helper()
		calls.take()
		capture.take()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		expectCalls(t, what, calls.take(), want)
		for _, in := range capture.take() {
			if tx, ok := in.(*dynamodb.TransactWriteItemsInput); ok && len(tx.TransactItems) != items {
				t.Errorf("%s: a transaction of %d items, want %d", what, len(tx.TransactItems), items)
			}
		}
	}
	tx := map[string]int{"TransactWriteItems": 1}

	if err := acquire(leased(false, false))(); err != nil { // warms the bucket's image
		t.Fatal(err)
	}
	deleted := leased(false, false)
	step("acquire", tx, 2, acquire(deleted))
	step("end, deleting the record", tx, 2, end(s, deleted.Lease, 0, false))
	kept := leased(false, false)
	step("acquire", tx, 2, acquire(kept))
	step("resume an open lease", map[string]int{"GetItem": 1}, 0, resume(kept.Lease.ID))
	step("end, keeping a tombstone", tx, 3, end(s, kept.Lease, 600_000, false))
	step("resume an ended lease", map[string]int{"GetItem": 2}, 0, resume(kept.Lease.ID))
	step("acquire with a reused id", tx, 3, acquire(leased(true, false)))
	step("acquire born ended", tx, 2, acquire(leased(false, true)))
	step("acquire born ended, with a reused id", tx, 3, acquire(leased(true, true)))

	unseen := leased(false, false)
	if err := acquire(unseen)(); err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, localConfig(), tt.admin.Table(), []Option{WithoutStreams()}, atLocal, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.apiOption, capture.apiOption)
	})
	step("end, keeping a tombstone, of a record never seen", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 3, end(other, unseen.Lease, 600_000, true))
}

// TestCostRefusalFlood: 500 refused acquires of one exhausted key cost one
// call each without the deny cache (each refusal of the image confirmed by
// a consistent read), and with it (tollgate.WithDenyCache, the default max
// age of 1 s) one call per second of the flood: 500 in 0.5 s cost one, 500
// in 5 s cost five.
func TestCostRefusalFlood(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.RateLimit("rph", 10, time.Hour)) // a token every 6 minutes
	one := tollgate.Consume{"rph": 1}
	cases := []struct {
		name  string
		opts  []tollgate.Option
		step  time.Duration // the clock's move after each acquire
		calls int
	}{
		{"without the cache", nil, time.Millisecond, 500},
		{"deny cache, 500 in 0.5 s", []tollgate.Option{tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge)}, time.Millisecond, 1},
		{"deny cache, 500 in 5 s", []tollgate.Option{tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge)}, 10 * time.Millisecond, 5},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := tt.client(t, 5*time.Second)
			clk := clock.NewFake(instrEpoch)
			lim, _ := limitertest.Planes(t, cl.Store, time.Hour, append([]tollgate.Option{tollgate.WithClock(clk),
				tollgate.WithRefreshInterval(time.Hour)}, c.opts...)...)
			key := fmt.Sprintf("abuser-%d", i)
			for range 10 {
				le, err := lim.Acquire(ctx, key, "api", one, limits)
				if err != nil {
					t.Fatal(err)
				}
				if err := le.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cl.calls.take()
			for n := range 500 {
				if _, err := lim.Acquire(ctx, key, "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
					t.Fatalf("acquire %d of an exhausted key: %v, want a refusal", n, err)
				}
				clk.Advance(c.step)
			}
			got := cl.calls.take()
			n := 0
			for _, v := range got {
				n += v
			}
			t.Logf("500 refusals: %s", formatCalls(got))
			if n != c.calls {
				t.Errorf("500 refused acquires made %d DynamoDB calls %s, want %d", n, formatCalls(got), c.calls)
			}
			if c.opts != nil && lim.Stats().Deny.Served != uint64(500-c.calls) {
				t.Errorf("served from memory %d, want %d", lim.Stats().Deny.Served, 500-c.calls)
			}
		})
	}
}
