package dynamodb

import (
	"strconv"

	"github.com/tollgate-rl/tollgate/store"
)

// Key layout (DESIGN 5). {ns} is the namespace id; entity ids and resources
// cannot contain '#', so '#' separates key parts unambiguously.
const (
	attrPK     = "PK"
	attrSK     = "SK"
	attrGSI1PK = "GSI1PK"
	attrGSI1SK = "GSI1SK"
	attrGSI2PK = "GSI2PK"
	attrGSI2SK = "GSI2SK"
	attrGSI3PK = "GSI3PK"
	attrGSI3SK = "GSI3SK"
	attrGSI4PK = "GSI4PK"
	attrGSI4SK = "GSI4SK"

	skMeta    = "#META"
	skState   = "#STATE"
	skConfig  = "#CONFIG"
	skVersion = "#VERSION"

	gsi1 = "GSI1" // parent -> children
	gsi2 = "GSI2" // resource -> buckets
	gsi3 = "GSI3" // entity -> its buckets; resource -> entities with custom config
	gsi4 = "GSI4" // namespace -> all its items, for purge
)

func entityPK(ns, id string) string         { return ns + "/ENTITY#" + id }
func resourcePK(ns, resource string) string { return ns + "/RESOURCE#" + resource }
func systemPK(ns string) string             { return ns + "/SYSTEM#" }
func auditPK(ns, entity string) string      { return ns + "/AUDIT#" + entity }
func entityConfigSK(resource string) string { return skConfig + "#" + resource }
func auditSK(id string) string              { return "#AUDIT#" + id }
func parentGSI1PK(ns, parent string) string { return ns + "/PARENT#" + parent }
func registryPK() string                    { return "_/SYSTEM#" }

func bucketPK(ns string, k store.BucketKey, shard int) string {
	return ns + "/BUCKET#" + k.Entity + "#" + k.Resource + "#" + strconv.Itoa(shard)
}

// Bucket attribute names: b_{limit}_{field}. Limit names cannot start with
// '_' or contain '#', and the field is always the last two characters, so a
// name decodes unambiguously.
const (
	fieldFullTick = "ft" // refilling limits: the full tick (bucket.FullTick; image.go)
	fieldTokens   = "tk" // concurrency limits: balance, millitokens
	fieldCapacity = "cp"
	fieldAmount   = "ra" // refill amount, millitokens
	fieldPeriod   = "rp" // refill period, ms
	fieldConsumed = "tc" // net consumed counter, millitokens (for usage)

	// Schema 1 refilling limits held their balance (tk) and refill
	// remainder at the item's rf, with a lower bound of their full time;
	// the next write converts them (image.go).
	fieldRem    = "rm"
	fieldFullAt = "fa"

	attrRefilled   = "rf" // the time of the last write (schema 1: of the last refill)
	attrEntity     = "entity"
	attrResource   = "resource"
	attrShard      = "shard"
	attrShardCount = "shard_count"
	attrTTL        = "ttl"
	attrOp         = "op" // id of the last delta write (see addDeltas)
	attrVersion    = "v"  // schema 1: counted normal writes and refunds; removed on conversion
	attrEvents     = "ev" // counts acquires, for usage (see target.event)
)

func limitAttr(name, field string) string { return "b_" + name + "_" + field }
