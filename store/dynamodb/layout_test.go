package dynamodb

import (
	glob "path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// TestNamespaceKeyPrefix checks the exported layout facts (layout.go)
// against the key functions and encoders the backend writes items with:
// every partition key of a namespace's items, in the table and in GSI1 to
// GSI3, starts with NamespaceKeyPrefix, and GSI4's is one of
// NamespaceIndexKeys' parts: the one its table key hashes to.
// The IAM policies of package deploy rely on it (dynamodb:LeadingKeys).
func TestNamespaceKeyPrefix(t *testing.T) {
	const ns = "3f9a0c1d2e4b5a67"
	prefix := NamespaceKeyPrefix(ns)
	bk := store.BucketKey{Entity: "key-1", Resource: "openai/gpt-4o"}
	keys := map[string]string{
		"entityPK":         entityPK(ns, "key-1"),
		"resourcePK":       resourcePK(ns, "openai/gpt-4o"),
		"systemPK":         systemPK(ns),
		"auditPK":          auditPK(ns, "key-1"),
		"auditPK system":   auditPK(ns, ""),
		"parentGSI1PK":     parentGSI1PK(ns, "org-1"),
		"bucketPK":         bucketPK(ns, bk, 3),
		"LeasePK":          schema.LeasePK(ns, "lease-1"),
		"LeasePartitionPK": schema.LeasePartitionPK(ns, 15),
		"usagePK":          usagePK(ns, store.UsageKey{Entity: "key-1", Resource: "r"}),
	}
	items := map[string]item{}
	ent, err := encodeEntity(ns, model.Entity{ID: "key-1", ParentID: "org-1", Cascade: true})
	if err != nil {
		t.Fatal(err)
	}
	items["entity"] = ent
	for name, sc := range map[string]model.Scope{"system": {}, "resource": {Resource: "r"}, "entity": {Entity: "key-1", Resource: "r"}} {
		items["config "+name] = encodeConfig(ns, sc, model.Config{})
	}
	if items["audit"], err = encodeAudit(ns, model.AuditEvent{ID: "01J0000000000000000000000", Entity: "key-1"}); err != nil {
		t.Fatal(err)
	}
	if items["lease"], err = encodeLease(ns, &store.LeaseRecord{ID: "lease-1", Entity: "key-1", Resource: "r"}); err != nil {
		t.Fatal(err)
	}
	if items["lease tombstone"], err = encodeLease(ns, &store.LeaseRecord{ID: "lease-1", Entity: "key-1", Resource: "r", EndedAt: 1, KeepUntil: 2}); err != nil {
		t.Fatal(err)
	}
	items["bucket"] = encodeItem(itemID{ns: ns, key: bk}, &image{exists: true, shards: 1}, nil)
	_, hash := model.GenerateKey()
	byName, byHash := encodeKey(ns, model.Key{Name: "ci", Hash: hash, ExpiresAt: time.UnixMilli(1)})
	items["key by name"] = byName
	keys["key by hash"] = getS(byHash, attrPK)
	parts := NamespaceIndexKeys(ns)[:NamespaceIndexParts]
	if got, want := getS(byHash, attrGSI4PK), namespaceIndexKey(ns, byHash); got != want || !slices.Contains(parts, got) {
		t.Errorf("key by hash: GSI4PK = %q, want its part %q of NamespaceIndexKeys %v (PurgeNamespace deletes it)", got, want, parts)
	}
	if !strings.HasPrefix(keys["key by hash"], KeyHashPartitionPrefix()) {
		t.Errorf("key by hash: PK %q does not start with KeyHashPartitionPrefix %q", keys["key by hash"], KeyHashPartitionPrefix())
	}
	delete(keys, "key by hash") // outside the namespace by design: checked above
	for name, it := range items {
		for _, attr := range []string{attrPK, attrGSI1PK, attrGSI2PK, attrGSI3PK} {
			if v := getS(it, attr); v != "" {
				keys[name+" "+attr] = v
			}
		}
		if got, want := getS(it, attrGSI4PK), namespaceIndexKey(ns, it); got != want || !slices.Contains(parts, got) {
			t.Errorf("%s: GSI4PK = %q, want its part %q of NamespaceIndexKeys %v", name, got, want, parts)
		}
	}
	for name, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			t.Errorf("%s = %q does not start with NamespaceKeyPrefix %q", name, k, prefix)
		}
		if strings.HasPrefix(k, RegistryPartitionKey()) {
			t.Errorf("%s = %q is in the registry partition", name, k)
		}
	}
	if strings.HasPrefix(RegistryPartitionKey(), prefix) || strings.HasPrefix(prefix, RegistryPartitionKey()) {
		t.Errorf("registry %q and namespace prefix %q overlap", RegistryPartitionKey(), prefix)
	}
	// The reserved partitions are apart: a LeadingKeys pattern for one
	// (StringEquals, or the key prefix with "*") reaches no other.
	reserved := []string{RegistryPartitionKey(), ChangesPartitionKey(), KeyHashPartitionPrefix()}
	for i, a := range reserved {
		if !strings.HasPrefix(a, "_/") {
			t.Errorf("reserved partition %q is not under _/", a)
		}
		for j, b := range reserved {
			if i != j && strings.HasPrefix(b, a) {
				t.Errorf("reserved partitions %q and %q overlap", a, b)
			}
		}
	}
}

// TestTableDefinitionKeys checks that TableDefinition is what CheckTable
// verifies: its key schema and indexes pass verifyLayout.
func TestTableDefinitionKeys(t *testing.T) {
	in := TableDefinition("t")
	if aws.ToString(in.TableName) != "t" || in.StreamSpecification == nil {
		t.Fatalf("TableDefinition = %+v", in)
	}
	if got := IndexNames(); len(got) != len(in.GlobalSecondaryIndexes) {
		t.Fatalf("IndexNames = %v, table has %d indexes", got, len(in.GlobalSecondaryIndexes))
	}
	d := &types.TableDescription{AttributeDefinitions: in.AttributeDefinitions, KeySchema: in.KeySchema,
		StreamSpecification: in.StreamSpecification, TableStatus: types.TableStatusActive}
	for _, g := range in.GlobalSecondaryIndexes {
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes,
			types.GlobalSecondaryIndexDescription{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection})
	}
	if err := (&Admin{client: &client{table: "t"}}).verifyLayout(d); err != nil {
		t.Fatal(err)
	}
}

// NamespaceIndexKeyPatterns match, as IAM's StringLike would ('?' one
// character), every GSI4 key of the namespace and no key of another.
func TestNamespaceIndexKeyPatterns(t *testing.T) {
	const id, other = "3f9a0c1d2e4b5a67", "3f9a0c1d2e4b5a68"
	matches := func(key string) bool {
		for _, p := range NamespaceIndexKeyPatterns(id) {
			if ok, err := glob.Match(p, key); err != nil || ok {
				return ok
			}
		}
		return false
	}
	for _, k := range NamespaceIndexKeys(id) {
		if !matches(k) {
			t.Errorf("key %q of the namespace not matched by %v", k, NamespaceIndexKeyPatterns(id))
		}
	}
	for _, k := range append(NamespaceIndexKeys(other), id+"#10", id+"0", id[:15], id+"/ENTITY#x") {
		if matches(k) {
			t.Errorf("key %q matched by %v", k, NamespaceIndexKeyPatterns(id))
		}
	}
}
