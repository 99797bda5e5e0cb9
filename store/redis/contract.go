package redis

import "github.com/tollgate-rl/tollgate/store"

var (
	_ store.Store        = (*Store)(nil)
	_ store.UsageStore   = (*Store)(nil)
	_ store.BucketLister = (*Store)(nil)
)
