package dynamodb

import (
	"github.com/tollgate-rl/tollgate/store"
)

// itemID names one bucket item: a shard of a bucket.
type itemID struct {
	ns    string
	key   store.BucketKey
	shard int
}

// bucketID names a bucket: every shard of it.
type bucketID struct {
	ns string
	k  store.BucketKey
}
