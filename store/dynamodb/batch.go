package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// batchGet reads items by key, consistently, returning them in key order
// (nil where absent). It splits at DynamoDB's 100 keys and retries
// unprocessed keys with backoff, within one budget. One key is one GetItem:
// the same read capacity, and a lighter call than a batch of one (on
// DynamoDB Local, about 10% of a read; BENCHMARKS.md).
func (c *client) batchGet(ctx context.Context, keys []item) ([]item, error) {
	return c.readItems(ctx, c.newBudget(), keys)
}

// readItems is batchGet retrying within b.
func (c *client) readItems(ctx context.Context, b *budget, keys []item) ([]item, error) {
	if len(keys) == 1 {
		res, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: keys[0], ConsistentRead: aws.Bool(true)})
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
		for {
			res, err := c.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{
					c.table: {Keys: pending, ConsistentRead: aws.Bool(true)},
				},
			})
			if err != nil {
				return nil, fmt.Errorf("dynamodb: batch read: %w", err)
			}
			for _, it := range res.Responses[c.table] {
				out[index[keyString(it)]] = it
			}
			if pending = res.UnprocessedKeys[c.table].Keys; len(pending) == 0 {
				break
			}
			// Unprocessed keys were throttled: back off.
			if err := b.retry(ctx, errContended); err != nil {
				return nil, b.giveUp(err, fmt.Sprintf("batch read (%d keys unprocessed)", len(pending)))
			}
		}
	}
	return out, nil
}

// batchDelete deletes items by key, 25 at a time, retrying unprocessed ones
// with backoff, within one budget per 25 (a purge deletes many).
func (c *client) batchDelete(ctx context.Context, keys []item) error {
	for start := 0; start < len(keys); start += 25 {
		b := c.newBudget()
		var reqs []types.WriteRequest
		for _, k := range keys[start:min(start+25, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		for {
			res, err := c.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{c.table: reqs},
			})
			if err != nil {
				return fmt.Errorf("dynamodb: batch delete: %w", err)
			}
			if reqs = res.UnprocessedItems[c.table]; len(reqs) == 0 {
				break
			}
			if err := b.retry(ctx, errContended); err != nil {
				return b.giveUp(err, fmt.Sprintf("batch delete (%d items unprocessed)", len(reqs)))
			}
		}
	}
	return nil
}

func keyString(it item) string { return getS(it, attrPK) + "\x00" + getS(it, attrSK) }

func asCond(err error, target **types.ConditionalCheckFailedException) bool {
	return err != nil && errors.As(err, target)
}

// parallel runs f(0..n-1) concurrently and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}
