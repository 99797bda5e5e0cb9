package dynamodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

func testKey(name string) model.Key {
	_, hash := model.GenerateKey()
	return model.Key{Name: name, Namespace: "default", Role: model.RoleAcquire, Hash: hash, CreatedAt: instrEpoch}
}

// What each key call costs (docs/dynamodb.md 5), and the items it writes:
// both carry the namespace in GSI4 (purge) and, for a key that expires,
// ttl a day past the expiry.
func TestKeysCostAndItems(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	ctx := context.Background()
	k := testKey("ci")
	k.ExpiresAt = instrEpoch.Add(time.Hour)
	if err := c.CreateKey(ctx, "ns1", k, configEvent("01A")); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "CreateKey", c.calls.take(), map[string]int{"TransactWriteItems": 1})
	wantTTL := k.ExpiresAt.Add(24 * time.Hour).Unix()
	for _, key := range []item{keyByNameKey("ns1", "ci"), keyByHashKey(k.Hash)} {
		it := readRaw(t, tt.admin, getS(key, attrPK), getS(key, attrSK))
		if it == nil {
			t.Fatalf("item %s missing", getS(key, attrPK))
		}
		if ttl, _ := getN(it, attrTTL); ttl != wantTTL {
			t.Errorf("%s: ttl %d, want %d (the expiry plus a day)", getS(key, attrPK), ttl, wantTTL)
		}
		if getS(it, attrGSI4PK) != namespaceIndexKey("ns1", key) {
			t.Errorf("%s: GSI4PK %q, want the namespace's", getS(key, attrPK), getS(it, attrGSI4PK))
		}
	}
	if _, err := c.KeyByHash(ctx, k.Hash); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "KeyByHash", c.calls.take(), map[string]int{"GetItem": 1})
	if ks, err := c.ListKeys(ctx, "ns1", "", 10); err != nil || len(ks) != 1 {
		t.Fatalf("ListKeys = %v, %v", ks, err)
	}
	expectCalls(t, "ListKeys", c.calls.take(), map[string]int{"Query": 1})
	if err := c.DeleteKey(ctx, "ns1", "ci", configEvent("01B")); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, "DeleteKey", c.calls.take(), map[string]int{"GetItem": 1, "TransactWriteItems": 1})

	// A key without expiry has no ttl.
	forever := testKey("forever")
	if err := c.CreateKey(ctx, "ns1", forever, configEvent("01C")); err != nil {
		t.Fatal(err)
	}
	if it := readRaw(t, tt.admin, schema.KeyHashPK(forever.Hash), schema.SKKeyHash); it[attrTTL] != nil {
		t.Errorf("a key that never expires has ttl %v", it[attrTTL])
	}
}

// DynamoDB's TTL deletes the two items of an expired key independently:
// revoking one whose item by hash is gone still works, and frees the name.
func TestDeleteKeyWithoutItemByHash(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	k := testKey("ci")
	if err := s.CreateKey(ctx, "ns1", k, configEvent("01A")); err != nil {
		t.Fatal(err)
	}
	if err := s.batchDelete(ctx, []item{keyByHashKey(k.Hash)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeyByHash(ctx, k.Hash); !errors.Is(err, model.ErrKeyNotFound) {
		t.Fatalf("KeyByHash after its item went = %v, want ErrKeyNotFound", err)
	}
	if err := s.DeleteKey(ctx, "ns1", "ci", configEvent("01B")); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	if ks, err := s.ListKeys(ctx, "ns1", "", 10); err != nil || len(ks) != 0 {
		t.Errorf("ListKeys after delete = %v, %v", ks, err)
	}
	if err := s.CreateKey(ctx, "ns1", testKey("ci"), configEvent("01C")); err != nil {
		t.Errorf("the name is not free again: %v", err)
	}
}
