package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// Stored API keys (store.Keys): found by hash from anywhere and by name in
// their namespace, each change audited with it.
func keyCases() []testCase {
	return []testCase{
		{"CreateGetDelete", testKeyCreateGetDelete},
		{"RoundTrip", testKeyRoundTrip},
		{"Exists", testKeyExists},
		{"NotFound", testKeyNotFound},
		{"List", testKeyList},
		{"ListBadLimit", testKeyListBadLimit},
		{"Isolation", testKeyIsolation},
		{"Audited", testKeyAudited},
		{"Purged", testKeyPurged},
	}
}

// newKey returns a key of the env's namespace named name, with a fresh
// random hash (cases may share a store, and hashes are global).
func (e *Env) newKey(name string) model.Key {
	_, hash := model.GenerateKey()
	return model.Key{Name: name, Namespace: "name-" + e.ns, Role: model.RoleAcquire, Hash: hash,
		CreatedAt: time.UnixMilli(T0).UTC()}
}

func (e *Env) createKey(k model.Key) model.AuditEvent {
	e.t.Helper()
	ev := e.event(model.ActionKeyCreate, "", "")
	ev.Details = map[string]string{"key": k.Name}
	if err := e.s.CreateKey(e.ctx, e.ns, k, ev); err != nil {
		e.t.Fatalf("CreateKey(%s): %v", k.Name, err)
	}
	return ev
}

func (e *Env) deleteKey(name string) model.AuditEvent {
	e.t.Helper()
	ev := e.event(model.ActionKeyRevoke, "", "")
	ev.Details = map[string]string{"key": name}
	if err := e.s.DeleteKey(e.ctx, e.ns, name, ev); err != nil {
		e.t.Fatalf("DeleteKey(%s): %v", name, err)
	}
	return ev
}

// wantKey checks that KeyByHash(want.Hash) returns want, field by field.
func (e *Env) wantKey(want model.Key) {
	e.t.Helper()
	got, err := e.s.KeyByHash(e.ctx, want.Hash)
	if err != nil {
		e.t.Fatalf("KeyByHash(%s): %v", want.Name, err)
	}
	if !sameKey(got, want) {
		e.t.Errorf("KeyByHash = %+v\nwant %+v", got, want)
	}
}

func (e *Env) wantNoKey(hash string) {
	e.t.Helper()
	if k, err := e.s.KeyByHash(e.ctx, hash); !errors.Is(err, model.ErrKeyNotFound) {
		e.t.Errorf("KeyByHash(%s) = %+v, %v; want ErrKeyNotFound", hash, k, err)
	}
}

// sameKey compares every field; times must be equal and in UTC.
func sameKey(a, b model.Key) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.Role == b.Role && a.Entity == b.Entity &&
		a.AllowLimits == b.AllowLimits && a.Hash == b.Hash && sameTime(a.CreatedAt, b.CreatedAt) &&
		sameTime(a.ExpiresAt, b.ExpiresAt)
}

// sameTime is Equal, and the zero time stays zero, and any other is UTC.
func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() && b.IsZero()
	}
	return a.Equal(b) && a.Location() == time.UTC && b.Location() == time.UTC
}

func (e *Env) listKeys(after string, limit int) []model.Key {
	e.t.Helper()
	ks, err := e.s.ListKeys(e.ctx, e.ns, after, limit)
	if err != nil {
		e.t.Fatalf("ListKeys(%q, %d): %v", after, limit, err)
	}
	return ks
}

func keyNames(ks []model.Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Name
	}
	return out
}

func testKeyCreateGetDelete(t *testing.T, e *Env) {
	k := e.newKey("ci")
	e.wantNoKey(k.Hash)
	e.createKey(k)
	e.wantKey(k)
	if got := e.listKeys("", 10); len(got) != 1 || !sameKey(got[0], k) {
		t.Errorf("ListKeys = %+v, want %+v", got, k)
	}
	e.deleteKey("ci")
	e.wantNoKey(k.Hash)
	if got := e.listKeys("", 10); len(got) != 0 {
		t.Errorf("ListKeys after delete = %v", keyNames(got))
	}
	// The name and the hash are free again.
	e.createKey(k)
	e.wantKey(k)
}

// Every field survives the store: times at millisecond precision, UTC;
// a zero expiry stays zero.
func testKeyRoundTrip(t *testing.T, e *Env) {
	full := e.newKey("scoped.admin:x@y-1")
	full.Role, full.Entity, full.AllowLimits = model.RoleAdmin, "org-1", true
	full.CreatedAt = time.UnixMilli(T0 + 123).UTC()
	full.ExpiresAt = time.UnixMilli(T0 + 86_400_000 + 7).UTC()
	plain := e.newKey("plain")
	plain.Role = model.RoleRead
	for _, k := range []model.Key{full, plain} {
		e.createKey(k)
		e.wantKey(k)
	}
	got := e.listKeys("", 10)
	if len(got) != 2 || !sameKey(got[0], plain) || !sameKey(got[1], full) {
		t.Errorf("ListKeys = %+v\nwant %+v and %+v", got, plain, full)
	}
}

func testKeyExists(t *testing.T, e *Env) {
	k := e.newKey("ci")
	e.createKey(k)
	dupName := e.newKey("ci")
	if err := e.s.CreateKey(e.ctx, e.ns, dupName, e.event(model.ActionKeyCreate, "", "")); !errors.Is(err, model.ErrKeyExists) {
		t.Errorf("CreateKey of a taken name = %v, want ErrKeyExists", err)
	}
	e.wantNoKey(dupName.Hash)
	// A hash is unique across namespaces.
	other := &Env{t: t, ctx: e.ctx, s: e.s, ns: newNamespace(t), clk: e.clk, eventSeq: 1000}
	dupHash := other.newKey("other")
	dupHash.Hash = k.Hash
	if err := other.s.CreateKey(other.ctx, other.ns, dupHash, other.event(model.ActionKeyCreate, "", "")); !errors.Is(err, model.ErrKeyExists) {
		t.Errorf("CreateKey of a taken hash in another namespace = %v, want ErrKeyExists", err)
	}
	if got := other.listKeys("", 10); len(got) != 0 {
		t.Errorf("the refused key was stored: %v", keyNames(got))
	}
	if n := len(other.audit("")); n != 0 {
		t.Errorf("the refused key was audited: %d events", n)
	}
	e.wantKey(k)
	// The same name in another namespace is another key.
	same := other.newKey("ci")
	other.createKey(same)
	other.wantKey(same)
	e.wantKey(k)
}

func testKeyNotFound(t *testing.T, e *Env) {
	_, hash := model.GenerateKey()
	e.wantNoKey(hash)
	if err := e.s.DeleteKey(e.ctx, e.ns, "none", e.event(model.ActionKeyRevoke, "", "")); !errors.Is(err, model.ErrKeyNotFound) {
		t.Errorf("DeleteKey of an unknown name = %v, want ErrKeyNotFound", err)
	}
	if n := len(e.audit("")); n != 0 {
		t.Errorf("the refused delete was audited: %d events", n)
	}
	e.createKey(e.newKey("ci"))
	e.deleteKey("ci")
	if err := e.s.DeleteKey(e.ctx, e.ns, "ci", e.event(model.ActionKeyRevoke, "", "")); !errors.Is(err, model.ErrKeyNotFound) {
		t.Errorf("DeleteKey twice = %v, want ErrKeyNotFound", err)
	}
}

func testKeyList(t *testing.T, e *Env) {
	if got := e.listKeys("", 10); len(got) != 0 {
		t.Fatalf("ListKeys of an empty namespace = %v", keyNames(got))
	}
	var want []string
	for _, name := range []string{"k07", "k02", "k10", "k01", "k05", "k09", "k03", "k08", "k04", "k06", "k11"} {
		e.createKey(e.newKey(name))
		want = append(want, name)
	}
	slices.Sort(want)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("paging does not end: %v", got)
		}
		page := e.listKeys(after, 4)
		if len(page) > 4 {
			t.Fatalf("page of %d keys, limit 4", len(page))
		}
		got = append(got, keyNames(page)...)
		if len(page) < 4 {
			break
		}
		after = page[len(page)-1].Name
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged names = %v, want %v", got, want)
	}
	// after is exclusive and need not be a key's name.
	if got := keyNames(e.listKeys("k04", 3)); !slices.Equal(got, want[4:7]) {
		t.Errorf("ListKeys(after k04, 3) = %v, want %v", got, want[4:7])
	}
	if got := keyNames(e.listKeys("k045", 2)); !slices.Equal(got, want[4:6]) {
		t.Errorf("ListKeys(after k045, 2) = %v, want %v", got, want[4:6])
	}
	if got := e.listKeys("k11", 10); len(got) != 0 {
		t.Errorf("ListKeys after the last = %v", keyNames(got))
	}
}

func testKeyListBadLimit(t *testing.T, e *Env) {
	for _, limit := range []int{-1, 0, model.MaxKeyPage + 1} {
		_, err := e.s.ListKeys(e.ctx, e.ns, "", limit)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != "limit" {
			t.Errorf("ListKeys(limit %d) = %v, want a validation error of limit", limit, err)
		}
	}
	if _, err := e.s.ListKeys(e.ctx, e.ns, "", model.MaxKeyPage); err != nil {
		t.Errorf("ListKeys(limit %d) = %v", model.MaxKeyPage, err)
	}
}

// Namespace B neither lists nor deletes namespace A's keys.
func testKeyIsolation(t *testing.T, e *Env) {
	k := e.newKey("ci")
	e.createKey(k)
	other := &Env{t: t, ctx: e.ctx, s: e.s, ns: newNamespace(t), clk: e.clk, eventSeq: 1000}
	if got := other.listKeys("", 10); len(got) != 0 {
		t.Errorf("ns2 ListKeys = %v", keyNames(got))
	}
	if err := other.s.DeleteKey(other.ctx, other.ns, "ci", other.event(model.ActionKeyRevoke, "", "")); !errors.Is(err, model.ErrKeyNotFound) {
		t.Errorf("ns2 DeleteKey of ns1's key = %v, want ErrKeyNotFound", err)
	}
	e.wantKey(k)
	if got := e.listKeys("", 10); len(got) != 1 {
		t.Errorf("ns1 ListKeys = %v, want ci", keyNames(got))
	}
}

// Create and delete each append their event (keys' events have no entity).
func testKeyAudited(t *testing.T, e *Env) {
	k := e.newKey("ci")
	want := []model.AuditEvent{e.createKey(k), e.deleteKey("ci")}
	got := e.audit("")
	if len(got) != len(want) {
		t.Fatalf("ListAudit = %v, want %v", eventIDs(got), eventIDs(want))
	}
	for i := range got {
		if !sameEvent(got[i], want[i]) {
			t.Errorf("ListAudit[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Purging a namespace deletes its keys, and nobody else's.
func testKeyPurged(t *testing.T, e *Env) {
	victim := e.OtherNamespace()
	n := model.Namespace{Name: victim.ns, ID: victim.ns, CreatedAt: time.UnixMilli(T0)}
	if err := e.s.CreateNamespace(e.ctx, n); err != nil {
		t.Fatal(err)
	}
	gone := []model.Key{victim.newKey("a"), victim.newKey("b")}
	for _, k := range gone {
		victim.createKey(k)
	}
	kept := e.newKey("a")
	e.createKey(kept)
	if err := e.s.SetNamespaceDeleted(e.ctx, n.Name, time.UnixMilli(T0+1)); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PurgeNamespace(e.ctx, n.Name, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range gone {
		e.wantNoKey(k.Hash)
	}
	if got := victim.listKeys("", 10); len(got) != 0 {
		t.Errorf("purged namespace lists keys %v", keyNames(got))
	}
	e.wantKey(kept)
	// The purged hashes can be stored again.
	victim.createKey(gone[0])
	victim.wantKey(gone[0])
}
