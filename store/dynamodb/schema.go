package dynamodb

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The table's layout as data, for the Terraform module's tests
// (deploy/terraform), beside the exports of layout.go. Each is derived
// from the code that creates the table or writes the items, so that a
// change here shows up in those artefacts' tests.

// TableLayout is the table as CreateTable makes it (docs/dynamodb.md 2).
type TableLayout struct {
	PartitionKey, SortKey string // key attribute names; both strings
	Indexes               []IndexLayout
	BillingMode           string // PAY_PER_REQUEST
	StreamViewType        string // NEW_AND_OLD_IMAGES
	TTLAttribute          string // the attribute CreateTable turns TTL on for
	// StringAttributes are the attribute definitions: every key attribute
	// of the table and its indexes, all strings.
	StringAttributes []string
}

// IndexLayout is one global secondary index as CreateTable makes it.
type IndexLayout struct {
	Name, PartitionKey, SortKey string // both keys are strings
	Projection                  string // ALL or KEYS_ONLY
}

// Layout returns the table's layout, read from the CreateTable input this
// package sends.
func Layout() TableLayout {
	in := (&Store{table: "layout"}).createTableInput()
	l := TableLayout{BillingMode: string(in.BillingMode), TTLAttribute: attrTTL}
	l.PartitionKey, l.SortKey = keyNames(in.KeySchema)
	for _, a := range in.AttributeDefinitions {
		if a.AttributeType == types.ScalarAttributeTypeS {
			l.StringAttributes = append(l.StringAttributes, aws.ToString(a.AttributeName))
		}
	}
	for _, g := range in.GlobalSecondaryIndexes {
		ix := IndexLayout{Name: aws.ToString(g.IndexName)}
		ix.PartitionKey, ix.SortKey = keyNames(g.KeySchema)
		if g.Projection != nil {
			ix.Projection = string(g.Projection.ProjectionType)
		}
		l.Indexes = append(l.Indexes, ix)
	}
	if sp := in.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
		l.StreamViewType = string(sp.StreamViewType)
	}
	return l
}

func keyNames(ks []types.KeySchemaElement) (hash, rng string) {
	for _, k := range ks {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	return hash, rng
}

// NamespaceIndexes returns the indexes whose partition keys begin with
// NamespaceKeyPrefix for every item that has an entry in them, in the
// order of Layout: those a tenant's LeadingKeys-conditioned queries may
// use. GSI4's partition key is the bare namespace id, so it is not among
// them (PurgeNamespace, its reader, is an operator's task).
func NamespaceIndexes() []string {
	const id = "0123456789abcdef"
	prefix := NamespaceKeyPrefix(id)
	var names []string
	for _, ix := range indexes {
		seen, all := false, true
		for _, it := range sampleItems(id) {
			if _, ok := it[ix.pk]; !ok {
				continue
			}
			seen = true
			all = all && strings.HasPrefix(getS(it, ix.pk), prefix)
		}
		if seen && all {
			names = append(names, ix.name)
		}
	}
	return names
}

// sampleItems returns one item of each kind this package writes in
// namespace ns, made by the functions that write them.
func sampleItems(ns string) []item {
	ent, _ := encodeEntity(ns, model.Entity{ID: "child", ParentID: "parent"})
	audit, _ := encodeAudit(ns, model.AuditEvent{ID: "01J00000000000000000000000", Entity: "child"})
	lease, _ := encodeLease(ns, &store.LeaseRecord{ID: "lease", Entity: "child", Resource: "res"})
	bucket := encodeItem(itemID{ns: ns, key: store.BucketKey{Entity: "child", Resource: "res"}}, &image{}, nil)
	return []item{
		ent, audit, lease, bucket,
		encodeConfig(ns, model.Scope{}, model.Config{}),
		encodeConfig(ns, model.Scope{Resource: "res"}, model.Config{}),
		encodeConfig(ns, model.Scope{Entity: "child", Resource: "res"}, model.Config{}),
		usageKeyItem(ns, store.UsageKey{Entity: "child", Resource: "res", Window: store.Hourly}),
	}
}

// VersionRecord returns the key of the schema version record (partition
// and sort key) and the name of its number attribute, which holds
// SchemaVersion: CheckTable refuses a table without it. A table created
// other than by CreateTable (deploy/terraform) writes it itself.
func VersionRecord() (pk, sk, attr string) {
	return registryPK(), skVersion, attrSchemaVersion
}
