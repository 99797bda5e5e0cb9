package embedded

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// File layout (docs/embedded.md). Top-level bbolt buckets:
//
//	meta      "format" -> formatVersion
//	registry  namespace name -> namespace (JSON)
//	nsids     namespace id -> namespace name (ids are unique)
//	keys      stored API key hash -> key and its namespace id (JSON)
//	ns        namespace id -> a nested bucket per namespace holding:
//	            entities  entity id -> entity (JSON)
//	            children  lp(parent) + child id -> empty
//	            configs   lp(entity) + resource -> config (JSON)
//	            audit     lp(entity) + event id -> event (JSON)
//	            audit-by-id  event id -> entity: the namespace's events in
//	              time order (auditlog.go; created by the first write or
//	              range read since it came)
//	            buckets   lp(entity) + resource -> bucket record (binary)
//	            leases    lease id -> durable lease record (JSON; created
//	              by the first write to the namespace since leases came)
//	            keys      stored API key name -> its hash (created likewise)
//	            usage, usage-by-resource, usage-expiry: usage snapshots
//	              and their indexes, created by the first AddUsage (usage.go)
//
// lp(s) is s prefixed with its length as a uvarint: a prefix-free code, so
// an entity's keys share a prefix no other entity's keys start with, and any
// string (even one the limiter would reject) encodes unambiguously.
var (
	bktMeta     = []byte("meta")
	bktRegistry = []byte("registry")
	bktNSIDs    = []byte("nsids")
	bktNS       = []byte("ns")
	bktKeys     = []byte("keys")

	bktEntities = []byte("entities")
	bktChildren = []byte("children")
	bktConfigs  = []byte("configs")
	bktAudit    = []byte("audit")
	bktBuckets  = []byte("buckets")
	bktLeases   = []byte("leases")
	bktNSKeys   = []byte("keys")

	keyFormat = []byte("format")
)

// topBuckets are the top-level buckets.
var topBuckets = [][]byte{bktMeta, bktRegistry, bktNSIDs, bktNS, bktKeys}

// formatVersion is written in meta at creation; Open refuses other versions.
const formatVersion = "1"

// nsSubBuckets are the buckets inside each namespace's bucket.
var nsSubBuckets = [][]byte{bktEntities, bktChildren, bktConfigs, bktAudit, bktBuckets, bktLeases, bktNSKeys}

// appendLP appends lp(s) to dst.
func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// pairKey is lp(a) + b: the key of a bucket, config, child or audit event.
func pairKey(a, b string) []byte {
	return append(appendLP(make([]byte, 0, binary.MaxVarintLen64+len(a)+len(b)), a), b...)
}

// bucketKey is the key of a bucket record.
func bucketKey(k store.BucketKey) []byte { return pairKey(k.Entity, k.Resource) }

// entityPrefix starts every key of entity in configs and buckets (and of
// its children and audit events).
func entityPrefix(entity string) []byte { return appendLP(nil, entity) }

// maxKey bounds what this backend accepts in one key, with room for the
// length prefix: bbolt refuses longer keys.
const maxKey = bolt.MaxKeySize - binary.MaxVarintLen64

// checkNS rejects a namespace id bbolt cannot name a bucket with.
func checkNS(ns string) error {
	if ns == "" || len(ns) > maxKey {
		return model.Invalid("namespace", ns, fmt.Sprintf("the id must be 1 to %d bytes", maxKey))
	}
	return nil
}

// checkPair rejects an entity and resource (or entity and event id) too
// long for one key.
func checkPair(field, a, b string) error {
	if len(a)+len(b) > maxKey {
		return model.Invalid(field, a+"/"+b, fmt.Sprintf("longer than %d bytes together", maxKey))
	}
	return nil
}

// nsBucket returns the namespace's bucket, or nil if nothing was ever
// written in it.
func nsBucket(tx *bolt.Tx, ns string) *bolt.Bucket {
	return tx.Bucket(bktNS).Bucket([]byte(ns))
}

// nsBucketForWrite returns the namespace's bucket, creating it with its
// sub-buckets.
func nsBucketForWrite(tx *bolt.Tx, ns string) (*bolt.Bucket, error) {
	b, err := tx.Bucket(bktNS).CreateBucketIfNotExists([]byte(ns))
	if err != nil {
		return nil, err
	}
	for _, name := range nsSubBuckets {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// sub returns a sub-bucket of a namespace bucket; nil-safe so that reads of
// a namespace never written return nothing.
func sub(nsb *bolt.Bucket, name []byte) *bolt.Bucket {
	if nsb == nil {
		return nil
	}
	return nsb.Bucket(name)
}

// deletePrefix deletes every key of b starting with prefix and returns how
// many it deleted.
func deletePrefix(b *bolt.Bucket, prefix []byte) (int, error) {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}

// init checks the format of an existing file and loads every bucket and
// lease record into memory, then creates the top-level buckets of a new
// file and those an existing file of the same format lacks (keys came
// later: adding an empty bucket changes no record, so the format stays 1).
// It reads before it writes, so that a record that does not decode is
// refused before anything is written, and writes only if a bucket or the
// format record is missing.
func (s *Store) init() error {
	var missing bool
	err := s.db.View(func(tx *bolt.Tx) error {
		if err := checkFormat(tx); err != nil {
			return err
		}
		meta := tx.Bucket(bktMeta)
		missing = meta == nil || meta.Get(keyFormat) == nil
		for _, name := range topBuckets {
			missing = missing || tx.Bucket(name) == nil
		}
		return s.load(tx)
	})
	if err != nil || !missing {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range topBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bktMeta)
		if meta.Get(keyFormat) == nil {
			return meta.Put(keyFormat, []byte(formatVersion))
		}
		return nil
	})
}
