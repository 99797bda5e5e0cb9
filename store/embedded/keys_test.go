package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

func testKey(name string) model.Key {
	_, hash := model.GenerateKey()
	return model.Key{Name: name, Namespace: "default", Role: model.RoleAdmin, Hash: hash,
		CreatedAt: time.UnixMilli(1_700_000_000_123).UTC()}
}

func keyEvent(action string, ms int64) model.AuditEvent {
	return model.AuditEvent{ID: "01J" + time.UnixMilli(ms).UTC().Format("20060102150405.000"), Time: time.UnixMilli(ms).UTC(), Action: action}
}

// Keys, a reset bucket and their audit events are in the file after a
// restart; the generation starts again (only its moving matters).
func TestKeysAndResetSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := tempFile(t)
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	k := testKey("ci")
	if err := s.CreateKey(ctx, "ns1", k, keyEvent(model.ActionKeyCreate, 1)); err != nil {
		t.Fatal(err)
	}
	rpm := bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 60_000}
	br := store.BucketRequest{Key: store.BucketKey{Entity: "e", Resource: "r"}, Limits: []store.LimitRequest{{Name: "rpm", Params: rpm, Check: true}}}
	if err := s.Penalize(ctx, "ns1", &store.PenaltyRequest{Now: 1000, Until: 60_000, Bucket: br}); err != nil {
		t.Fatal(err)
	}
	ev := keyEvent(model.ActionLimitReset, 2)
	ev.Entity = "e"
	if err := s.Reset(ctx, "ns1", &store.ResetRequest{Now: 2000, Bucket: br, Event: &ev}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if got, err := s.KeyByHash(ctx, k.Hash); err != nil || got.Name != "ci" || !got.CreatedAt.Equal(k.CreatedAt) {
		t.Errorf("KeyByHash after restart = %+v, %v", got, err)
	}
	if ks, err := s.ListKeys(ctx, "ns1", "", 10); err != nil || len(ks) != 1 {
		t.Errorf("ListKeys after restart = %+v, %v", ks, err)
	}
	if evs, err := s.ListAudit(ctx, "ns1", "e", "", 10); err != nil || len(evs) != 1 || evs[0].ID != ev.ID {
		t.Errorf("ListAudit(e) after restart = %+v, %v; want the reset's event", evs, err)
	}
	recs, err := s.ReadBuckets(ctx, "ns1", []store.BucketKey{br.Key})
	if err != nil || recs[0] == nil || recs[0].Limits[0].State.Tokens != 10_000 {
		t.Errorf("bucket after restart = %+v, %v; want rpm full", recs, err)
	}
}

// A file written before keys existed (no keys buckets at all) opens, and
// keys can be created in it: Open adds the top-level bucket, the first
// write to a namespace adds its own.
func TestFileWithoutKeysOpens(t *testing.T) {
	ctx := context.Background()
	path := tempFile(t)
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEntity(ctx, "ns1", model.Entity{ID: "e"}, keyEvent(model.ActionEntityCreate, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("ns")).Bucket([]byte("ns1")).DeleteBucket([]byte("keys")); err != nil {
			return err
		}
		return tx.DeleteBucket([]byte("keys"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if ks, err := s.ListKeys(ctx, "ns1", "", 10); err != nil || len(ks) != 0 {
		t.Errorf("ListKeys of an old file = %+v, %v", ks, err)
	}
	k := testKey("ci")
	if _, err := s.KeyByHash(ctx, k.Hash); !errors.Is(err, model.ErrKeyNotFound) {
		t.Errorf("KeyByHash of an old file = %v, want ErrKeyNotFound", err)
	}
	if err := s.CreateKey(ctx, "ns1", k, keyEvent(model.ActionKeyCreate, 2)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.KeyByHash(ctx, k.Hash); err != nil || got.Name != "ci" {
		t.Errorf("KeyByHash = %+v, %v", got, err)
	}
}

// The generation moves only with committed changes: a refused one leaves
// it, and bucket changes never move it.
func TestGenerationOnlyCommitted(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempFile(t))
	if !s.LocalGeneration() {
		t.Error("LocalGeneration = false, want true: the file is this process's")
	}
	k := testKey("ci")
	if err := s.CreateKey(ctx, "ns1", k, keyEvent(model.ActionKeyCreate, 1)); err != nil {
		t.Fatal(err)
	}
	g0, _ := s.Generation(ctx)
	if err := s.CreateKey(ctx, "ns1", k, keyEvent(model.ActionKeyCreate, 2)); !errors.Is(err, model.ErrKeyExists) {
		t.Fatalf("CreateKey twice = %v, want ErrKeyExists", err)
	}
	rpm := bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 60_000}
	br := store.BucketRequest{Key: store.BucketKey{Entity: "e", Resource: "r"}, Limits: []store.LimitRequest{{Name: "rpm", Params: rpm, Check: true, Amount: 1}}}
	if _, err := s.Consume(ctx, "ns1", &store.ConsumeRequest{Now: 1, Buckets: []store.BucketRequest{br}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, "ns1", &store.ResetRequest{Now: 2, Bucket: br}); err != nil {
		t.Fatal(err)
	}
	if g1, _ := s.Generation(ctx); g1 != g0 {
		t.Errorf("Generation moved from %d to %d without a change of the control plane", g0, g1)
	}
}
