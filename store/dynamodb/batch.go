package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// batchGet reads items by key, consistently, returning them in key order
// (nil where absent). It splits at DynamoDB's 100 keys and retries
// unprocessed keys with backoff. One key is one GetItem: the same read
// capacity, and a lighter call than a batch of one (on DynamoDB Local,
// about 10% of a read; BENCHMARKS.md).
func (s *Store) batchGet(ctx context.Context, keys []item) ([]item, error) {
	if len(keys) == 1 {
		res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: keys[0], ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("dynamodb: read: %w", err)
		}
		return []item{res.Item}, nil
	}
	out := make([]item, len(keys))
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[keyString(k)] = i
	}
	for start := 0; start < len(keys); start += 100 {
		pending := keys[start:min(start+100, len(keys))]
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt >= s.maxAttempts {
				return nil, fmt.Errorf("dynamodb: batch read: %d keys unprocessed after %d attempts", len(pending), attempt)
			}
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{
					s.table: {Keys: pending, ConsistentRead: aws.Bool(true)},
				},
			})
			if err != nil {
				return nil, fmt.Errorf("dynamodb: batch read: %w", err)
			}
			for _, it := range res.Responses[s.table] {
				out[index[keyString(it)]] = it
			}
			pending = res.UnprocessedKeys[s.table].Keys
		}
	}
	return out, nil
}

// batchDelete deletes items by key, 25 at a time, retrying unprocessed ones.
func (s *Store) batchDelete(ctx context.Context, keys []item) error {
	for start := 0; start < len(keys); start += 25 {
		var reqs []types.WriteRequest
		for _, k := range keys[start:min(start+25, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		for attempt := 0; len(reqs) > 0; attempt++ {
			if attempt >= s.maxAttempts {
				return fmt.Errorf("dynamodb: batch delete: %d items unprocessed after %d attempts", len(reqs), attempt)
			}
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			res, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{s.table: reqs},
			})
			if err != nil {
				return fmt.Errorf("dynamodb: batch delete: %w", err)
			}
			reqs = res.UnprocessedItems[s.table]
		}
	}
	return nil
}

func keyString(it item) string { return getS(it, attrPK) + "\x00" + getS(it, attrSK) }

// backoff sleeps before retry number attempt+1: exponential from 5ms, capped
// at 200ms, with full jitter so that contending writers spread out.
func backoff(ctx context.Context, attempt int) error {
	d := min(5*time.Millisecond<<min(attempt, 6), 200*time.Millisecond)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func asCond(err error, target **types.ConditionalCheckFailedException) bool {
	return err != nil && errors.As(err, target)
}
