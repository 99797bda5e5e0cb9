package dynamodb

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// nsScene is a namespace filled through the Store: entities, resource and
// entity configs, and the audit event of each change, with what the
// namespace-wide readers must list.
type nsScene struct {
	ns       string
	entities []string      // ids, in order
	scopes   []model.Scope // configs, in CompareScopes order
	events   []string      // audit ids, in order
}

// fillNamespace registers ns and writes n entities, n/10 resource configs
// and n/20 entity configs, each with its audit event (several in one
// millisecond, so that the log's order rests on whole ids).
func fillNamespace(t *testing.T, s *Store, ns string, n int) *nsScene {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateNamespace(ctx, model.Namespace{Name: ns, ID: ns, CreatedAt: time.UnixMilli(1_700_000_000_000)}); err != nil {
		t.Fatal(err)
	}
	sc := &nsScene{ns: ns}
	event := func(action, entity string) model.AuditEvent {
		ms := 1_700_000_000_000 + int64(len(sc.events)/3)
		ev := model.AuditEvent{ID: ulid.MustNew(uint64(ms), rand.Reader).String(), Time: time.UnixMilli(ms).UTC(),
			Action: action, Entity: entity}
		sc.events = append(sc.events, ev.ID)
		return ev
	}
	cfg := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 10)}}
	for i := range n {
		id := fmt.Sprintf("e%04d", i)
		if err := s.CreateEntity(ctx, ns, model.Entity{ID: id, CreatedAt: time.UnixMilli(1_700_000_000_000)}, event(model.ActionEntityCreate, id)); err != nil {
			t.Fatal(err)
		}
		sc.entities = append(sc.entities, id)
	}
	for i := range n / 10 {
		scope := model.ResourceScope(fmt.Sprintf("r%03d", i))
		if err := s.PutConfig(ctx, ns, scope, cfg, event(model.ActionConfigSet, "")); err != nil {
			t.Fatal(err)
		}
		sc.scopes = append(sc.scopes, scope)
	}
	for i := range n / 20 {
		scope := model.Scope{Entity: sc.entities[i*3], Resource: "r"}
		if err := s.PutConfig(ctx, ns, scope, cfg, event(model.ActionConfigSet, scope.Entity)); err != nil {
			t.Fatal(err)
		}
		sc.scopes = append(sc.scopes, scope)
	}
	slices.SortFunc(sc.scopes, model.CompareScopes)
	slices.Sort(sc.events) // ids of one millisecond are random after it
	return sc
}

// check lists sc's namespace through every namespace-wide reader of GSI4,
// in small pages, and reports what differs from what was written.
func (sc *nsScene) check(t *testing.T, s *Store, when string) {
	t.Helper()
	ctx := context.Background()
	var entities []string
	for after := ""; ; {
		page, err := s.ListEntities(ctx, sc.ns, after, 7)
		if err != nil {
			t.Fatalf("%s: ListEntities: %v", when, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			entities = append(entities, e.ID)
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(entities, sc.entities) {
		t.Errorf("%s: ListEntities by 7 gave %d entities %v..., want %d in order", when, len(entities), entities[:min(5, len(entities))], len(sc.entities))
	}
	var scopes []model.Scope
	var after *model.Scope
	for {
		page, err := s.ListConfigs(ctx, sc.ns, after, 3)
		if err != nil {
			t.Fatalf("%s: ListConfigs: %v", when, err)
		}
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			scopes = append(scopes, c.Scope)
		}
		last := page[len(page)-1].Scope
		after = &last
	}
	if !slices.Equal(scopes, sc.scopes) {
		t.Errorf("%s: ListConfigs by 3 = %v, want %v", when, scopes, sc.scopes)
	}
	var events []string
	for q := (store.AuditRange{Limit: 9}); ; {
		page, err := s.ListAuditRange(ctx, sc.ns, q)
		if err != nil {
			t.Fatalf("%s: ListAuditRange: %v", when, err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > q.Limit {
			t.Fatalf("%s: ListAuditRange gave %d events, limit %d", when, len(page), q.Limit)
		}
		for _, ev := range page {
			events = append(events, ev.ID)
		}
		q.After = page[len(page)-1].ID
	}
	if !slices.Equal(events, sc.events) {
		t.Errorf("%s: ListAuditRange by 9 gave %d events, want the %d written, in id order", when, len(events), len(sc.events))
	}
}

// indexEntries returns the table keys of the GSI4 entries under key.
func indexEntries(t *testing.T, s *Store, key string) []item {
	t.Helper()
	its, err := s.query(context.Background(), &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(gsi4),
		KeyConditionExpression:    aws.String("GSI4PK = :k"),
		ExpressionAttributeValues: item{":k": str(key)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

// Items of one namespace are spread over GSI4's 16 parts, each under the
// part its table key hashes to, none under the bare id; the readers merge
// the parts back into one order, page by page with exact cursors.
func TestNamespaceIndexSpread(t *testing.T) {
	s := newTable(t)
	sc := fillNamespace(t, s, "ns-spread", 200)
	if got := indexEntries(t, s, schema.LegacyNamespaceIndexKey(sc.ns)); len(got) != 0 {
		t.Errorf("%d entries under the legacy key %q, want none from this version", len(got), sc.ns)
	}
	entityParts, total := map[string]int{}, 0
	for _, key := range NamespaceIndexKeys(sc.ns)[:NamespaceIndexParts] {
		for _, it := range indexEntries(t, s, key) {
			total++
			if got := getS(it, attrGSI4PK); got != key || got != namespaceIndexKey(sc.ns, it) {
				t.Fatalf("entry %s %s under %q, its part is %q", getS(it, attrPK), getS(it, attrSK), got, namespaceIndexKey(sc.ns, it))
			}
			if getS(it, attrSK) == skMeta {
				entityParts[key]++
			}
		}
	}
	if want := len(sc.entities) + len(sc.scopes) + len(sc.events); total != want {
		t.Errorf("%d GSI4 entries over the parts, want %d (entities, configs, events)", total, want)
	}
	if len(entityParts) <= 12 {
		t.Errorf("200 entities use %d of the 16 parts: %v", len(entityParts), entityParts)
	}
	sc.check(t, s, "spread")
}

// The part of an item depends on its whole table key, and only on it.
func TestNamespaceIndexPart(t *testing.T) {
	seen := map[int]bool{}
	for i := range 64 {
		id := fmt.Sprintf("lease-%d", i)
		pk, sk := schema.LeasePK("ns", id), id
		p := schema.NamespaceIndexPart(pk, sk)
		if p != schema.NamespaceIndexPart(pk, sk) || p < 0 || p >= schema.NamespaceIndexParts {
			t.Fatalf("part of %s %s = %d", pk, sk, p)
		}
		seen[p] = true
	}
	// 64 lease ids share at most 16 partition keys: the sort key spreads them.
	if len(seen) < 12 {
		t.Errorf("64 lease records use %d parts", len(seen))
	}
	for _, k := range [][2]string{{"ns/ENTITY#e1", "#META"}, {"a", "bc"}, {"ab", "c"}, {"", ""}} {
		if want := fnvOf(k[0]+"\x00"+k[1]) % 16; uint32(schema.NamespaceIndexPart(k[0], k[1])) != want {
			t.Errorf("NamespaceIndexPart(%q, %q) = %d, want FNV-1a of PK, 0x00, SK mod 16 = %d (docs/dynamodb.md 2.3)",
				k[0], k[1], schema.NamespaceIndexPart(k[0], k[1]), want)
		}
	}
	if got := schema.NamespaceIndexKey("ns", "ns/ENTITY#e1", "#META"); got != fmt.Sprintf("ns#%x", fnvOf("ns/ENTITY#e1\x00#META")%16) {
		t.Errorf("NamespaceIndexKey = %q, want ns#{one hex digit}", got)
	}
}

// fnvOf is the 32-bit FNV-1a hash of s, written out as documented.
func fnvOf(s string) uint32 {
	h := uint32(2166136261)
	for _, b := range []byte(s) {
		h ^= uint32(b)
		h *= 16777619
	}
	return h
}

// toLegacy moves every GSI4 entry of ns under its parts back to the bare
// id, as an older Tollgate wrote them, and returns how many it moved.
func toLegacy(t *testing.T, s *Store, ns string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, key := range NamespaceIndexKeys(ns)[:NamespaceIndexParts] {
		for _, it := range indexEntries(t, s, key) {
			setIndexKey(t, s, it, ns)
			n++
		}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      item{attrPK: str(registryPK()), attrSK: str(skVersion)},
		UpdateExpression:         aws.String("REMOVE #n"),
		ExpressionAttributeNames: map[string]string{"#n": schema.AttrNamespaceIndex},
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setIndexKey sets the GSI4 partition key of the item whose keys it has.
func setIndexKey(t *testing.T, s *Store, it item, key string) {
	t.Helper()
	_, err := s.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       item{attrPK: it[attrPK], attrSK: it[attrSK]},
		UpdateExpression:          aws.String("SET GSI4PK = :k"),
		ExpressionAttributeValues: item{":k": str(key)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A table an older Tollgate wrote has every GSI4 entry under the bare
// namespace id. The readers see them there until the table is migrated;
// ReindexNamespaceIndex moves them all (resuming after an interruption,
// and finding nothing to do when run again), then records that the index
// is spread, after which readers query the parts alone. A purge still
// clears the legacy key.
func TestNamespaceIndexMigration(t *testing.T) {
	ctx := context.Background()
	tt := newTestTable(t)
	s := tt.admin
	a, b := fillNamespace(t, s, "ns-old-a", 60), fillNamespace(t, s, "ns-old-b", 40)
	moved := toLegacy(t, s, a.ns) + toLegacy(t, s, b.ns)
	if moved == 0 {
		t.Fatal("nothing to migrate")
	}

	// A process started on the old table (a new client: nothing cached).
	before := tt.client(t, 10*time.Second).Store
	a.check(t, before, "before the migration")
	b.check(t, before, "before the migration")

	// An interrupted run: namespace a done, half of b's entries moved, the
	// record not written.
	admin := s.Admin()
	na, err := admin.spreadNamespace(ctx, a.ns)
	if err != nil {
		t.Fatal(err)
	}
	legacyB := indexEntries(t, s, b.ns)
	for _, it := range legacyB[:len(legacyB)/2] {
		setIndexKey(t, s, it, namespaceIndexKey(b.ns, it))
	}
	mid := tt.client(t, 10*time.Second).Store
	a.check(t, mid, "after an interrupted migration")
	b.check(t, mid, "after an interrupted migration")

	n, err := admin.ReindexNamespaceIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := moved - na - len(legacyB)/2; n != want {
		t.Errorf("ReindexNamespaceIndex after the interruption moved %d, want the %d left", n, want)
	}
	for _, ns := range []string{a.ns, b.ns} {
		if left := indexEntries(t, s, ns); len(left) != 0 {
			t.Errorf("%d entries of %s left under the legacy key", len(left), ns)
		}
	}
	if n, err := admin.ReindexNamespaceIndex(ctx); err != nil || n != 0 {
		t.Errorf("ReindexNamespaceIndex again = %d, %v; want 0", n, err)
	}
	after := tt.client(t, 10*time.Second).Store
	a.check(t, after, "after the migration")
	b.check(t, after, "after the migration")
	// A store that had read the table before sees the record too.
	b.check(t, before, "after the migration, a process started before")

	// Once migrated, readers query the parts alone: an entry a process of
	// an older Tollgate writes under the legacy key now is not listed...
	stray := fmt.Sprintf("z%04d", 0)
	if err := s.CreateEntity(ctx, a.ns, model.Entity{ID: stray, CreatedAt: time.UnixMilli(1_700_000_000_000)},
		model.AuditEvent{ID: ulid.Make().String(), Time: time.Now().UTC(), Action: model.ActionEntityCreate, Entity: stray}); err != nil {
		t.Fatal(err)
	}
	setIndexKey(t, s, item{attrPK: str(entityPK(a.ns, stray)), attrSK: str(skMeta)}, a.ns)
	es, err := after.ListEntities(ctx, a.ns, a.entities[len(a.entities)-1], 10)
	if err != nil || len(es) != 0 {
		t.Errorf("ListEntities after the last entity = %v, %v; want none (the legacy key is no longer read)", es, err)
	}
	// ...but a purge removes it with the rest.
	if err := after.PurgeNamespace(ctx, a.ns, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetEntity(ctx, a.ns, stray); err == nil {
		t.Errorf("entity %v under the legacy key survived the purge", got)
	}
	for _, key := range NamespaceIndexKeys(a.ns) {
		if left := indexEntries(t, s, key); len(left) != 0 {
			t.Errorf("%d entries under %q after the purge", len(left), key)
		}
	}
}
