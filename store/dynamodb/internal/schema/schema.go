// Package schema is the layout of the Tollgate table (docs/dynamodb.md 2): its key
// parts, the attributes of its items, and the helpers that build and read
// attribute values.
//
// Two programs share it. The backend (store/dynamodb) writes every item;
// the stream consumer (store/dynamodb/stream) reads bucket items as their
// stream records show them, and keeps its own checkpoint and lease items
// in the registry partition. Keeping the layout here, rather than
// exporting it from the backend, lets both read it from one place without
// making it part of either package's public API.
package schema

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
)

// Key layout (docs/dynamodb.md 2.1). {ns} is the namespace id; entity ids and resources
// cannot contain '#', so '#' separates key parts unambiguously.
const (
	AttrPK     = "PK"
	AttrSK     = "SK"
	AttrGSI1PK = "GSI1PK"
	AttrGSI1SK = "GSI1SK"
	AttrGSI2PK = "GSI2PK"
	AttrGSI2SK = "GSI2SK"
	AttrGSI3PK = "GSI3PK"
	AttrGSI3SK = "GSI3SK"
	AttrGSI4PK = "GSI4PK"
	AttrGSI4SK = "GSI4SK"

	SKMeta    = "#META"
	SKState   = "#STATE" // the sort key of every bucket item
	SKConfig  = "#CONFIG"
	SKVersion = "#VERSION"

	GSI1 = "GSI1" // parent -> children
	GSI2 = "GSI2" // resource -> buckets
	GSI3 = "GSI3" // entity -> its buckets; resource -> entities with custom config
	GSI4 = "GSI4" // namespace -> all its items, for purge
)

// Version is the layout of items the backend reads and writes (docs/dynamodb.md
// 4.12), recorded in the table by the schema version record: key RegistryPK
// and SKVersion, number attribute AttrSchemaVersion.
const Version = 2

// AttrSchemaVersion is the number attribute of the schema version record.
const AttrSchemaVersion = "version"

// NamespacePrefix starts every partition key of namespace ns's items, in
// the table and in GSI1 to GSI3 (their key builders below begin with it);
// GSI4's partition keys are NamespaceIndexKeys.
func NamespacePrefix(ns string) string { return ns + "/" }

// NamespaceIndexParts is how many partition keys GSI4 spreads a
// namespace's items over (docs/dynamodb.md 2.3): one index partition takes
// about 1,000 writes a second, and every item created or deleted in a
// namespace writes its index (docs/scale.md 4).
const NamespaceIndexParts = 16

// NamespaceIndexKey is the GSI4 partition key of the item of namespace ns
// whose table key is (pk, sk): {ns}#{part}, part one lowercase hex digit,
// NamespaceIndexPart of the key. The same item always gets the same part.
func NamespaceIndexKey(ns, pk, sk string) string {
	return NamespaceIndexPartKey(ns, NamespaceIndexPart(pk, sk))
}

// NamespaceIndexPartKey is the GSI4 partition key of part i (0 to
// NamespaceIndexParts-1) of namespace ns.
func NamespaceIndexPartKey(ns string, i int) string {
	return ns + "#" + strconv.FormatUint(uint64(i), 16)
}

// NamespaceIndexPart is the part of the item whose table key is (pk, sk):
// the 32-bit FNV-1a hash of pk, a zero byte and sk, modulo
// NamespaceIndexParts. Both keys, not pk alone: a namespace's lease records
// share 16 partition keys and an entity's audit events one, which pk alone
// would pile into a few parts.
func NamespaceIndexPart(pk, sk string) int {
	h := fnv1a(2166136261, pk)
	h *= 16777619 // the zero byte between the keys: h ^ 0 is h
	return int(fnv1a(h, sk) % NamespaceIndexParts)
}

// LegacyNamespaceIndexKey is the GSI4 partition key of every item of
// namespace ns written before the key was spread: the bare id. Readers
// query it too until the table's version record says the namespace index
// is spread (AttrNamespaceIndex), which Admin.ReindexNamespaceIndex records
// once it has moved every such item to its part.
func LegacyNamespaceIndexKey(ns string) string { return ns }

// NamespaceIndexKeys are every GSI4 partition key of namespace ns: its
// parts in order, then, if legacy, the legacy key.
func NamespaceIndexKeys(ns string, legacy bool) []string {
	out := make([]string, 0, NamespaceIndexParts+1)
	for i := range NamespaceIndexParts {
		out = append(out, NamespaceIndexPartKey(ns, i))
	}
	if legacy {
		out = append(out, LegacyNamespaceIndexKey(ns))
	}
	return out
}

// AttrNamespaceIndex is the number attribute of the schema version record
// that says GSI4's keys are spread over NamespaceIndexParts parts and no
// item is left under a legacy key: absent on tables that may hold items an
// older Tollgate wrote.
const AttrNamespaceIndex = "ns_index_parts"

// Index is a global secondary index of the table.
type Index struct {
	Name, PK, SK string // its name and key attributes (strings)
	Projection   types.ProjectionType
}

// Indexes are the table's global secondary indexes (docs/dynamodb.md 2.3),
// GSI1 to GSI4. Only GSI1 projects everything: it indexes entity items,
// which change only on create and delete; the others are keys only, so
// that token updates never write an index.
var Indexes = []Index{
	{GSI1, AttrGSI1PK, AttrGSI1SK, types.ProjectionTypeAll},
	{GSI2, AttrGSI2PK, AttrGSI2SK, types.ProjectionTypeKeysOnly},
	{GSI3, AttrGSI3PK, AttrGSI3SK, types.ProjectionTypeKeysOnly},
	{GSI4, AttrGSI4PK, AttrGSI4SK, types.ProjectionTypeKeysOnly},
}

// EntityPK is the partition of an entity's item and its configs.
func EntityPK(ns, id string) string { return ns + "/ENTITY#" + id }

// ResourcePK is the partition of a resource's config.
func ResourcePK(ns, resource string) string { return ns + "/RESOURCE#" + resource }

// SystemPK is the partition of a namespace's system config.
func SystemPK(ns string) string { return ns + "/SYSTEM#" }

// AuditPK is the partition of an entity's audit events ("": system and
// resource config events).
func AuditPK(ns, entity string) string { return ns + "/AUDIT#" + entity }

// AuditLogPrefix starts the GSI4 sort key of every audit event of
// namespace ns, and AuditLogGSI4SK is the whole key of event id: each of
// GSI4's partitions of the namespace holds its share of the events in id
// order, which is time order (ids are ULIDs), and the namespace-wide
// listing and the sweep merge them (docs/dynamodb.md 2.3).
func AuditLogPrefix(ns string) string { return ns + "/AUDITLOG#" }

// AuditLogGSI4SK is the GSI4 sort key of the audit event id of ns.
func AuditLogGSI4SK(ns, id string) string { return AuditLogPrefix(ns) + id }

// EntityConfigSK is the sort key of an entity's config of resource.
func EntityConfigSK(resource string) string { return SKConfig + "#" + resource }

// AuditSK is the sort key of an audit event.
func AuditSK(id string) string { return "#AUDIT#" + id }

// ParentGSI1PK is the GSI1 partition of a parent's children.
func ParentGSI1PK(ns, parent string) string { return ns + "/PARENT#" + parent }

// RegistryPK is the reserved partition outside every namespace: the
// namespace registry, the schema version, and the stream consumer's
// checkpoint and lease items.
func RegistryPK() string { return "_/SYSTEM#" }

// ChangesPK is the reserved partition of the change generation, alone in
// it so that the item every process polls shares its partition with
// nothing (docs/dynamodb.md 4.15).
func ChangesPK() string { return "_/CHANGES#" }

// SKGeneration is the sort key of the change generation item, and
// AttrGeneration its number attribute.
const (
	SKGeneration   = "#GENERATION"
	AttrGeneration = "gen"
)

// KeysPK is the partition of namespace ns's stored API keys by name.
func KeysPK(ns string) string { return ns + "/KEYS#" }

// KeySK is the sort key of the key named name in KeysPK. Key names cannot
// contain '#'.
func KeySK(name string) string { return KeyPrefixSK + name }

// KeyPrefixSK starts the sort key of every key record by name.
const KeyPrefixSK = "#KEY#"

// KeyHashPrefix starts the partition key of every key record by hash: a
// reserved partition per key, outside every namespace, since a request's
// key is looked up before its namespace is known.
const KeyHashPrefix = "_/KEY#"

// KeyHashPK is the partition of the key record whose hash is hash, and
// SKKeyHash its sort key.
func KeyHashPK(hash string) string { return KeyHashPrefix + hash }

// SKKeyHash is the sort key of a key record by hash.
const SKKeyHash = "#KEY"

// bucketMark separates a bucket item's namespace from the rest of its
// partition key.
const bucketMark = "/BUCKET#"

// BucketPK is the partition key of shard `shard` of bucket k.
func BucketPK(ns string, k store.BucketKey, shard int) string {
	return ns + bucketMark + k.Entity + "#" + k.Resource + "#" + strconv.Itoa(shard)
}

// BucketNS returns the namespace of the bucket item whose partition key is
// pk; ok is false if pk is not a bucket item's.
func BucketNS(pk string) (ns string, ok bool) {
	i := strings.Index(pk, bucketMark)
	if i < 0 {
		return "", false
	}
	return pk[:i], true
}

// LeasePartitions is how many partitions a namespace's durable lease
// records are spread over (by a hash of the id): each takes a share of the
// writes, and the reconciler queries each.
const LeasePartitions = 16

// LeasePK is the partition key of the lease record id: one of the
// namespace's LeasePartitions lease partitions, named by a hex digit.
func LeasePK(ns, id string) string {
	return ns + "/LEASE#" + strconv.FormatUint(uint64(leasePartition(id)), 16)
}

// LeasePartitionPK is the partition key of lease partition i (0 to
// LeasePartitions-1).
func LeasePartitionPK(ns string, i int) string {
	return ns + "/LEASE#" + strconv.FormatUint(uint64(i), 16)
}

// leasePartition is the FNV-1a hash of id, modulo LeasePartitions.
func leasePartition(id string) uint32 {
	return fnv1a(2166136261, id) % LeasePartitions
}

// fnv1a continues the 32-bit FNV-1a hash h over the bytes of s (start with
// the offset basis 2166136261).
func fnv1a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// LeaseGSI3SK is a lease record's sort key in GSI3, under its entity's
// partition (EntityPK): leases listed per entity and resource.
func LeaseGSI3SK(resource, id string) string { return "LEASE#" + resource + "#" + id }

// Lease record attributes besides the keys (the sort key is the id).
const (
	AttrLeaseVersion = "lv"      // store.LeaseRecord.Version
	AttrExpires      = "expires" // Unix ms; 0: never
	AttrRecord       = "rec"     // the rest of the record, JSON

	// A tombstone's (LeaseTombstoneSK) besides those.
	AttrEndedAt   = "ended_at"   // Unix ms
	AttrEndedAs   = "ended_as"   // store.LeaseEnd
	AttrKeepUntil = "keep_until" // Unix ms; DynamoDB's ttl follows it
)

// TombstoneMark begins the sort key of every lease tombstone. It is '~',
// above every byte a lease id may hold (model.ValidateLeaseID:
// [A-Za-z0-9_.:@/-]), so that a lease partition sorts its open records
// (sort key: the id) before every tombstone, and a key condition SK <
// TombstoneMark reads the open records alone.
const TombstoneMark = "~"

// LeaseTombstoneSK is the sort key of the tombstone of lease id, in the
// partition of its open record (LeasePK).
func LeaseTombstoneSK(id string) string { return TombstoneMark + id }

// Bucket attribute names: b_{limit}_{field}. Limit names cannot start with
// '_' or contain '#', and the field is always the last two characters, so a
// name decodes unambiguously (LimitOfAttr).
const (
	FieldFullTick = "ft" // refilling limits: the full tick (bucket.FullTick)
	FieldTokens   = "tk" // concurrency limits: balance, millitokens
	FieldCapacity = "cp"
	FieldAmount   = "ra" // refill amount, millitokens
	FieldPeriod   = "rp" // refill period, ms; 0 for a calendar quota (one window)
	FieldWindow   = "cw" // a calendar quota's window, "month@UTC" (a string)
	FieldConsumed = "tc" // net consumed counter, millitokens (for usage)

	// Schema 1 refilling limits held their balance (tk) and refill
	// remainder at the item's rf, with a lower bound of their full time;
	// the backend's next write converts them.
	FieldRem    = "rm"
	FieldFullAt = "fa"

	AttrRefilled   = "rf" // the time of the last write (schema 1: of the last refill)
	AttrEntity     = "entity"
	AttrResource   = "resource"
	AttrShard      = "shard"
	AttrShardCount = "shard_count"
	AttrTTL        = "ttl"
	AttrOp         = "op" // id of the last delta write
	AttrVersion    = "v"  // schema 1: counted normal writes and refunds; removed on conversion
	AttrEvents     = "ev" // counts acquires, for usage

	// Bucket items carry their entity's parent and cascade flag (docs/dynamodb.md 4.6),
	// for operators reading the table and consumers of its stream.
	AttrParent  = "parent_id"
	AttrCascade = "cascade"
)

// LimitAttr is the name of a limit's field attribute.
func LimitAttr(name, field string) string { return "b_" + name + "_" + field }

// LimitOfAttr returns the limit whose field attribute attr is; ok is false
// if attr is not that field of any limit.
func LimitOfAttr(attr, field string) (name string, ok bool) {
	suffix := "_" + field
	if !strings.HasPrefix(attr, "b_") || !strings.HasSuffix(attr, suffix) || len(attr) < 2+len(suffix) {
		return "", false
	}
	return attr[2 : len(attr)-len(suffix)], true
}

// The write-pressure meter: a hidden rate limit every bucket item carries
// (the backend's meter.go says how it is used). Hidden limits are named
// with a leading underscore, which user limit names cannot have.
const (
	PressureLimit = "_wp" // the meter's limit name
	WriteCost     = 1000  // what one write debits from the meter, millitokens
)
