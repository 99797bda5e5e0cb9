package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The aggregator's mark says that an aggregator has run on the table, and
// which one last started, when:
//
//	_/SYSTEM#  #AGGREGATOR  at (Unix ms), by
//
// Read writes it when it starts, the Lambda function when an execution
// environment handles its first batch: one small write per process or
// environment, none per batch. On DynamoDB only an aggregator writes usage
// snapshots, so a query that finds none on a table without the mark can
// say why (`tollgate usage`) instead of showing an empty table. It has no
// TTL: an aggregator stopped long ago still tells that one ran, and when.

const skAggregatorMark = "#AGGREGATOR"

func aggregatorMarkKey() schema.Item {
	return schema.Item{schema.AttrPK: schema.Str(schema.RegistryPK()), schema.AttrSK: schema.Str(skAggregatorMark)}
}

// AggregatorMark is what the aggregator's mark records.
type AggregatorMark struct {
	At time.Time // when the aggregator named By started
	By string
}

// WriteAggregatorMark records in s's table that the aggregator named by
// runs on it, as of now.
func WriteAggregatorMark(ctx context.Context, s *dynamodb.Store, by string) error {
	return tableOf(s).writeAggregatorMark(ctx, by, time.Now())
}

func (t table) writeAggregatorMark(ctx context.Context, by string, at time.Time) error {
	_, err := t.db.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName: &t.name, Key: aggregatorMarkKey(),
		UpdateExpression:         aws.String("SET #at = :at, #by = :by"),
		ExpressionAttributeNames: map[string]string{"#at": "at", "#by": "by"}, // both reserved words
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":at": schema.Num(at.UnixMilli()), ":by": schema.Str(by),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamodb: write the aggregator's mark: %w", err)
	}
	return nil
}

// ReadAggregatorMark returns the mark of the aggregator that last started
// on s's table; ok is false if none ever wrote one (none ran, or only
// aggregators older than the mark did). One eventually consistent GetItem.
func ReadAggregatorMark(ctx context.Context, s *dynamodb.Store) (m AggregatorMark, ok bool, err error) {
	t := tableOf(s)
	out, err := t.db.GetItem(ctx, &ddb.GetItemInput{TableName: &t.name, Key: aggregatorMarkKey()})
	if err != nil {
		return m, false, fmt.Errorf("dynamodb: read the aggregator's mark: %w", err)
	}
	if out.Item == nil {
		return m, false, nil
	}
	at, err := schema.GetN(out.Item, "at")
	if err != nil {
		return m, false, fmt.Errorf("dynamodb: read the aggregator's mark: %w", err)
	}
	return AggregatorMark{At: time.UnixMilli(at), By: schema.GetS(out.Item, "by")}, true, nil
}
