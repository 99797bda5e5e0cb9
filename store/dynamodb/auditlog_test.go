package dynamodb

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Audit items written before the namespace-wide log kept {ns}/AUDIT#{entity}
// as their GSI4 sort key: not in ListAuditRange until ReindexAudit (run by
// tollgate deploy) gives them the new one; a second run finds nothing.
func TestReindexAudit(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	const ns = "ns-reindex"
	if err := s.CreateNamespace(ctx, model.Namespace{Name: ns, ID: ns, CreatedAt: time.UnixMilli(1_700_000_000_000)}); err != nil {
		t.Fatal(err)
	}
	var all []string
	event := func(ms int64, entity string) model.AuditEvent {
		ev := model.AuditEvent{ID: ulid.MustNew(uint64(ms), rand.Reader).String(), Time: time.UnixMilli(ms).UTC(),
			Action: model.ActionConfigSet, Entity: entity, Resource: "api"}
		all = append(all, ev.ID)
		return ev
	}
	for i, entity := range []string{"", "org-1", "", "org-2"} {
		ev := event(1_700_000_000_000+int64(i), entity)
		if i%2 == 0 { // as this version writes it
			if err := s.PutConfig(ctx, ns, model.ResourceScope("r"+ev.ID), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}, ev); err != nil {
				t.Fatal(err)
			}
			continue
		}
		it, err := encodeAudit(ns, ev) // as the previous layout wrote it
		if err != nil {
			t.Fatal(err)
		}
		it[attrGSI4SK] = str(auditPK(ns, entity))
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	listed := func() []string {
		t.Helper()
		evs, err := s.ListAuditRange(ctx, ns, store.AuditRange{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ev := range evs {
			ids = append(ids, ev.ID)
		}
		return ids
	}
	if got, want := listed(), []string{all[0], all[2]}; !slices.Equal(got, want) {
		t.Fatalf("before the reindex: %v, want the new layout's %v", got, want)
	}
	if n, err := s.Admin().ReindexAudit(ctx); err != nil || n != 2 {
		t.Fatalf("ReindexAudit = %d, %v; want 2", n, err)
	}
	if got := listed(); !slices.Equal(got, all) {
		t.Errorf("after the reindex: %v, want %v", got, all)
	}
	if n, err := s.Admin().ReindexAudit(ctx); err != nil || n != 0 {
		t.Errorf("ReindexAudit again = %d, %v; want 0", n, err)
	}
	// Each entity's log is as it was.
	evs, err := s.ListAudit(ctx, ns, "org-1", "", 10)
	if err != nil || len(evs) != 1 || evs[0].ID != all[1] {
		t.Errorf("ListAudit(org-1) = %+v, %v", evs, err)
	}
}
