package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ListerStore is a store that lists buckets.
type ListerStore interface {
	store.Store
	store.BucketLister
}

// RunBucketLister is the conformance suite of store.BucketLister.
func RunBucketLister(t *testing.T, newStore func(t *testing.T) ListerStore) {
	t.Helper()
	t.Run("Lister/ListsAndPages", func(t *testing.T) { listerListsAndPages(t, newStore(t)) })
	t.Run("Lister/BadArguments", func(t *testing.T) { listerBadArguments(t, newStore(t)) })
}

func listerListsAndPages(t *testing.T, s ListerStore) {
	ctx := context.Background()
	ns, other := newNamespace(t), newNamespace(t)
	p := bucket.Params{Capacity: 10_000, Amount: 1_000, Period: 60_000}
	consume := func(ns, entity, resource string, amount int64) {
		t.Helper()
		req := &store.ConsumeRequest{Now: T0, Buckets: []store.BucketRequest{{
			Key:    store.BucketKey{Entity: entity, Resource: resource},
			Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: amount}},
		}}}
		if ok, err := s.Consume(ctx, ns, req); err != nil || !ok {
			t.Fatalf("Consume: %v %v", ok, err)
		}
	}
	for i, e := range []string{"e3", "e1", "e5", "e2", "e4"} {
		consume(ns, e, "api", int64(1000*(i+1)))
	}
	consume(ns, "e0", "chat", 1000)
	consume(other, "e9", "api", 1000)
	var got []string
	after := ""
	for page := 0; page < 5; page++ {
		bs, err := s.ListBuckets(ctx, ns, "api", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			j := b.Record.Find("rpm")
			if j < 0 {
				t.Fatalf("bucket %s has no rpm: %+v", b.Entity, b.Record)
			}
			got = append(got, fmt.Sprintf("%s:%d", b.Entity, b.Record.Limits[j].State.Tokens))
		}
		if len(bs) < 2 {
			break
		}
		after = bs[len(bs)-1].Entity
	}
	want := "[e1:8000 e2:6000 e3:9000 e4:5000 e5:7000]"
	if fmt.Sprint(got) != want {
		t.Errorf("listing %v, want %s", got, want)
	}
}

func listerBadArguments(t *testing.T, s ListerStore) {
	ns := newNamespace(t)
	for _, c := range []struct {
		resource string
		limit    int
	}{{"", 10}, {"bad resource", 10}, {"api", 0}, {"api", store.MaxBucketPage + 1}} {
		if _, err := s.ListBuckets(context.Background(), ns, c.resource, "", c.limit); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ListBuckets(%q, %d) = %v, want a validation error", c.resource, c.limit, err)
		}
	}
}
