package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/store"
)

// ListBuckets implements store.BucketLister from the namespace's bucket
// index ("resource|entity", score 0): a page of members, then their
// hashes in one round trip. A member whose hash expired (a full bucket,
// forgotten) is skipped and dropped from the index.
func (s *Store) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	if err := store.ValidateBucketPage(resource, limit); err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	index := s.keys.buckets(ns)
	prefix := resource + "|"
	from := "[" + prefix
	if after != "" {
		from = "(" + prefix + after
	}
	var out []store.ListedBucket
	for len(out) < limit {
		members, err := s.c.Do(ctx, s.c.B().Zrange().Key(index).Min(from).Max("("+resource+"}").Bylex().Limit(0, int64(limit)).Build()).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("redis: list buckets: %w", err)
		}
		if len(members) == 0 {
			break
		}
		cmds := make(rueidis.Commands, len(members))
		for i, m := range members {
			cmds[i] = s.c.B().Hgetall().Key(s.keys.bucket(ns, strings.TrimPrefix(m, prefix), resource)).Build()
		}
		var gone []string
		for i, res := range s.c.DoMulti(ctx, cmds...) {
			m, err := res.AsStrMap()
			if err != nil {
				return nil, fmt.Errorf("redis: list buckets: %w", err)
			}
			snap, err := snapshotOf(m)
			if err != nil {
				return nil, err
			}
			if snap.rec == nil {
				gone = append(gone, members[i])
				continue
			}
			if len(out) < limit {
				out = append(out, store.ListedBucket{Entity: strings.TrimPrefix(members[i], prefix), Record: snap.rec})
			}
		}
		if len(gone) > 0 {
			// Lazily: a bucket written again meanwhile is indexed again
			// by its acquire.
			_ = s.c.Do(ctx, s.c.B().Zrem().Key(index).Member(gone...).Build()).Error()
		}
		from = "(" + members[len(members)-1]
	}
	return out, nil
}
