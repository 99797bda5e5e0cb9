package dynamodb

import (
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The table's layout (docs/dynamodb.md 2: key parts, attribute names) is owned by
// internal/schema, which the stream consumer (package stream) reads too.
// These are this package's short names for it.
const (
	attrPK     = schema.AttrPK
	attrSK     = schema.AttrSK
	attrGSI1PK = schema.AttrGSI1PK
	attrGSI1SK = schema.AttrGSI1SK
	attrGSI2PK = schema.AttrGSI2PK
	attrGSI2SK = schema.AttrGSI2SK
	attrGSI3PK = schema.AttrGSI3PK
	attrGSI3SK = schema.AttrGSI3SK
	attrGSI4PK = schema.AttrGSI4PK
	attrGSI4SK = schema.AttrGSI4SK

	skMeta            = schema.SKMeta
	skState           = schema.SKState
	skConfig          = schema.SKConfig
	skVersion         = schema.SKVersion
	attrSchemaVersion = schema.AttrSchemaVersion

	gsi1 = schema.GSI1
	gsi2 = schema.GSI2
	gsi3 = schema.GSI3
	gsi4 = schema.GSI4

	fieldFullTick = schema.FieldFullTick
	fieldTokens   = schema.FieldTokens
	fieldCapacity = schema.FieldCapacity
	fieldAmount   = schema.FieldAmount
	fieldPeriod   = schema.FieldPeriod
	fieldWindow   = schema.FieldWindow
	fieldConsumed = schema.FieldConsumed
	fieldRem      = schema.FieldRem
	fieldFullAt   = schema.FieldFullAt

	attrRefilled   = schema.AttrRefilled
	attrEntity     = schema.AttrEntity
	attrResource   = schema.AttrResource
	attrShard      = schema.AttrShard
	attrShardCount = schema.AttrShardCount
	attrTTL        = schema.AttrTTL
	attrOp         = schema.AttrOp // see addDeltas
	attrVersion    = schema.AttrVersion
	attrEvents     = schema.AttrEvents // see target.event
	attrParent     = schema.AttrParent
	attrCascade    = schema.AttrCascade
)

func entityPK(ns, id string) string         { return schema.EntityPK(ns, id) }
func resourcePK(ns, resource string) string { return schema.ResourcePK(ns, resource) }
func systemPK(ns string) string             { return schema.SystemPK(ns) }
func auditPK(ns, entity string) string      { return schema.AuditPK(ns, entity) }
func entityConfigSK(resource string) string { return schema.EntityConfigSK(resource) }
func auditSK(id string) string              { return schema.AuditSK(id) }
func parentGSI1PK(ns, parent string) string { return schema.ParentGSI1PK(ns, parent) }
func registryPK() string                    { return schema.RegistryPK() }
func limitAttr(name, field string) string   { return schema.LimitAttr(name, field) }

func bucketPK(ns string, k store.BucketKey, shard int) string { return schema.BucketPK(ns, k, shard) }

func shardKey(ns string, k store.BucketKey, shard int) item {
	return item{attrPK: str(bucketPK(ns, k, shard)), attrSK: str(skState)}
}

// shardKeys returns the item keys of shards 0..n-1 of a bucket.
func shardKeys(ns string, k store.BucketKey, n int) []item {
	keys := make([]item, n)
	for i := range keys {
		keys[i] = shardKey(ns, k, i)
	}
	return keys
}

// namespaceIndexKey is the GSI4 partition key of it, an item of namespace
// ns whose table keys are set: the part its keys hash to.
func namespaceIndexKey(ns string, it item) string {
	return schema.NamespaceIndexKey(ns, getS(it, attrPK), getS(it, attrSK))
}

// namespaceIndexPK is the GSI4 partition key of the item of namespace ns
// whose table key is (pk, sk).
func namespaceIndexPK(ns, pk, sk string) string { return schema.NamespaceIndexKey(ns, pk, sk) }
