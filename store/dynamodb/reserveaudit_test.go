package dynamodb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// txCapture records every call's operation input, for a test that looks
// into a transaction: how many items it writes.
type txCapture struct {
	mu     sync.Mutex
	inputs []any
}

func (c *txCapture) apiOption(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("TollgateTestCaptureInput",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.inputs = append(c.inputs, in.Parameters)
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// take returns the inputs captured since the last take.
func (c *txCapture) take() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.inputs
	c.inputs = nil
	return out
}

// A warm reservation with its audit event is still one TransactWriteItems:
// the bucket's write, the record's Put and the event's Put (no extra
// call). A refused one writes nothing, event included.
func TestReserveEventInTheLeaseTransaction(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	capture := &txCapture{}
	s := mustNew(t, localConfig(), tt.admin.Table(), []Option{WithoutStreams()}, atLocal, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, capture.apiOption)
	})
	const ns = "reserve-audit"
	k := store.BucketKey{Entity: "team", Resource: "emr"}
	reserve := func(id string, ev *model.AuditEvent) bool {
		t.Helper()
		req := &store.ConsumeRequest{Now: instrEpoch.UnixMilli(), Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
			{Name: "clusters", Params: bucket.Params{Capacity: 2000}, Check: true, Amount: 1000},
		}}}}
		req.Lease, req.Event = store.NewLeaseRecord(id, "test", req, 0), ev
		return mustConsume(t, s, ns, req)
	}
	event := func(id string) *model.AuditEvent {
		return &model.AuditEvent{ID: id, Time: instrEpoch.UTC().Truncate(time.Millisecond), Action: model.ActionReservationReserve,
			Entity: "team", Resource: "emr", Details: map[string]string{"reservation": "j"}}
	}
	if !reserve("r:j-cold", nil) { // warms this process's image of the bucket
		t.Fatal("cold reserve denied")
	}
	capture.take()
	if !reserve("r:j-warm", event("01JAAAAAAAAAAAAAAAAAAAAAA1")) {
		t.Fatal("warm reserve denied")
	}
	wantOneTransaction(t, capture.take(), 3)
	if reserve("r:j-full", event("01JAAAAAAAAAAAAAAAAAAAAAA2")) {
		t.Fatal("a reserve past capacity granted")
	}
	for _, in := range capture.take() {
		if _, ok := in.(*dynamodb.TransactWriteItemsInput); ok {
			t.Errorf("a refused reserve sent a transaction")
		}
	}
	evs, err := tt.admin.ListAudit(ctx, ns, "team", "", 10)
	if err != nil || len(evs) != 1 || evs[0].ID != "01JAAAAAAAAAAAAAAAAAAAAAA1" || evs[0].Details["reservation"] != "j" {
		t.Errorf("audit = %+v, %v; want the granted reserve's event alone", evs, err)
	}
}

// wantOneTransaction fails unless inputs is one TransactWriteItems of n
// items.
func wantOneTransaction(t *testing.T, inputs []any, n int) {
	t.Helper()
	if len(inputs) != 1 {
		t.Fatalf("%d calls, want 1 TransactWriteItems", len(inputs))
	}
	tx, ok := inputs[0].(*dynamodb.TransactWriteItemsInput)
	if !ok || len(tx.TransactItems) != n {
		t.Fatalf("call %T, want a TransactWriteItems of %d items", inputs[0], n)
	}
}
