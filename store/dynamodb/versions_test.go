package dynamodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// An entity or a config written before versions were kept (no "version"
// attribute) reads as version 1, and a change on version 1 replaces it
// at version 2, once: the same precondition then fails.
func TestLegacyItemsAtVersionOne(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	ns := "ns"
	ent, err := encodeEntity(ns, model.Entity{ID: "org", CreatedAt: time.UnixMilli(1_700_000_000_000).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	sc := model.ResourceScope("api")
	for _, it := range []item{ent, encodeConfig(ns, sc, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 5)}})} {
		if _, ok := it[attrRecordVersion]; ok {
			t.Fatalf("a legacy item with a version: %v", it)
		}
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := s.GetEntity(ctx, ns, "org"); err != nil || e.Version != 1 {
		t.Fatalf("legacy entity: %+v, %v; want version 1", e, err)
	}
	if cfgs, err := s.GetConfigs(ctx, ns, []model.Scope{sc}); err != nil || cfgs[0] == nil || cfgs[0].Version != 1 {
		t.Fatalf("legacy config: %v, %v; want version 1", cfgs, err)
	}
	ev := func(action string) model.AuditEvent {
		return model.AuditEvent{ID: "01J" + randomHex(11), Time: time.UnixMilli(1_700_000_000_000).UTC(), Action: action, Entity: "org"}
	}
	for i, want := range []error{nil, model.ErrPreconditionFailed} {
		err := s.UpdateEntity(ctx, ns, model.Entity{ID: "org", Name: "n"}, ev(model.ActionEntityUpdate), store.IfVersion(1))
		if !errors.Is(err, want) {
			t.Errorf("update %d of a legacy entity on version 1: %v, want %v", i, err, want)
		}
		err = s.PutConfig(ctx, ns, sc, model.Config{}, ev(model.ActionConfigSet), store.IfVersion(1))
		if !errors.Is(err, want) {
			t.Errorf("put %d of a legacy config on version 1: %v, want %v", i, err, want)
		}
	}
	if e, _ := s.GetEntity(ctx, ns, "org"); e.Version != 2 {
		t.Errorf("updated legacy entity at version %d, want 2", e.Version)
	}
}
