package dynamodb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// generation reads s's change generation; an error is fatal.
func generation(t testing.TB, s *Store) uint64 {
	t.Helper()
	g, err := s.Generation(context.Background())
	if err != nil {
		t.Fatalf("Generation: %v", err)
	}
	return g
}

func configEvent(id string) model.AuditEvent {
	return model.AuditEvent{ID: id, Time: instrEpoch, Action: model.ActionConfigSet}
}

var oneLimit = model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}

// The generation is one item in a partition of its own, read with one
// GetItem, raised inside each change's own transaction (no extra call),
// and by nothing on the data plane. A fresh table reads 0.
func TestGenerationItem(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ctx := context.Background()
	if g := generation(t, c.Store); g != 0 {
		t.Errorf("Generation of a fresh table = %d, want 0", g)
	}
	expectCalls(t, "Generation", c.calls.take(), map[string]int{"GetItem": 1})
	if c.LocalGeneration() {
		t.Error("LocalGeneration = true, want false: many processes share the table")
	}

	if err := c.PutConfig(ctx, "ns", model.ResourceScope("api"), oneLimit, configEvent("01A")); err != nil {
		t.Fatal(err)
	}
	// A put reads the version it replaces (store.Precondition), unless
	// the caller names it.
	expectCalls(t, "PutConfig", c.calls.take(), map[string]int{"GetItem": 1, "TransactWriteItems": 1})
	if g := generation(t, c.Store); g != 1 {
		t.Errorf("Generation after one change = %d, want 1", g)
	}
	raw := readRaw(t, tt.admin, schema.ChangesPK(), schema.SKGeneration)
	if raw == nil || getS(raw, attrGSI4PK) != "" || len(raw) != 3 {
		t.Errorf("generation item = %v, want PK, SK and %s only (no namespace, no index)", raw, schema.AttrGeneration)
	}

	// Buckets, audit reads and usage do not raise it.
	if !mustConsume(t, c, "ns", consumeReq(instrEpoch.UnixMilli(), rate100, 1_000, store.BucketKey{Entity: "e", Resource: "api"})) {
		t.Fatal("refused")
	}
	if err := c.Reset(ctx, "ns", &store.ResetRequest{Now: instrEpoch.UnixMilli(), Bucket: store.BucketRequest{
		Key: store.BucketKey{Entity: "e", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rpm", Params: rate100, Check: true}}}}); err != nil {
		t.Fatal(err)
	}
	if g := generation(t, c.Store); g != 1 {
		t.Errorf("Generation after bucket writes = %d, want 1", g)
	}

	// The namespace calls that were not transactions raise it too.
	n := model.Namespace{Name: "n1", ID: "id1", CreatedAt: instrEpoch}
	if err := c.CreateNamespace(ctx, n); err != nil {
		t.Fatal(err)
	}
	c.calls.take()
	if err := c.SetNamespaceDeleted(ctx, n.Name, instrEpoch); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "SetNamespaceDeleted", c.calls.take(), map[string]int{"TransactWriteItems": 1})
	if err := c.PurgeNamespace(ctx, n.Name, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.calls.take()["UpdateItem"]; got != 1 {
		t.Errorf("PurgeNamespace made %d UpdateItem calls, want 1 (the generation)", got)
	}
	if g := generation(t, c.Store); g != 4 {
		t.Errorf("Generation after create, delete and purge = %d, want 4", g)
	}

	// A put on a version reads nothing first.
	c.calls.take()
	if err := c.PutConfig(ctx, "ns", model.ResourceScope("api"), oneLimit, configEvent("01B"), store.IfVersion(1)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "PutConfig on a version", c.calls.take(), map[string]int{"TransactWriteItems": 1})
}

// A control-plane transaction cancelled for a conflict (two changes
// raising the generation at once, on DynamoDB) is retried, and raises the
// generation once.
func TestGenerationConflictRetried(t *testing.T) {
	tt := newTestTable(t)
	rec := &sleepRecorder{}
	c := tt.client(t, 5*time.Second, WithMaxAttempts(3), withSleep(rec.sleep))
	ctx := context.Background()
	for i, change := range []func() error{
		func() error { return c.PutConfig(ctx, "ns", model.ResourceScope("api"), oneLimit, configEvent("01A")) },
		func() error { return c.CreateKey(ctx, "ns", testKey("ci"), configEvent("01B")) },
		func() error { return c.SetNamespaceDeleted(ctx, "n1", instrEpoch) },
	} {
		if i == 2 {
			if err := c.CreateNamespace(ctx, model.Namespace{Name: "n1", ID: "id1", CreatedAt: instrEpoch}); err != nil {
				t.Fatal(err)
			}
		}
		before := generation(t, c.Store)
		c.net.take()
		c.net.fail(faultRule{op: "TransactWriteItems", times: 2, kind: faultTxConflict})
		if err := change(); err != nil {
			t.Fatalf("change %d with 2 conflicts (3 attempts): %v", i, err)
		}
		if req, inj := c.net.take(); req["TransactWriteItems"] != 3 || inj["TransactWriteItems"] != 2 {
			t.Errorf("change %d: %d transactions (%d cancelled), want 3 (2)", i, req["TransactWriteItems"], inj["TransactWriteItems"])
		}
		c.net.heal()
		if g := generation(t, c.Store); g != before+1 {
			t.Errorf("change %d: Generation %d -> %d, want one more", i, before, g)
		}
	}
}

// Concurrent changes through many processes all land, each raising the
// generation once: whatever conflicts DynamoDB reports on the shared
// item are retried.
func TestGenerationConcurrentChanges(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		c := tt.client(t, 10*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := "r" + string(rune('a'+w)) + string(rune('a'+i))
				errs <- c.PutConfig(ctx, "ns", model.ResourceScope(r), oneLimit, configEvent("01"+r))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := generation(t, tt.admin); g != writers*each {
		t.Errorf("Generation after %d changes = %d", writers*each, g)
	}
}

// readRaw reads an item as stored (nil: absent).
func readRaw(t testing.TB, s *Store, pk, sk string) item {
	t.Helper()
	its, err := s.batchGet(context.Background(), []item{{attrPK: str(pk), attrSK: str(sk)}})
	if err != nil {
		t.Fatal(err)
	}
	return its[0]
}
