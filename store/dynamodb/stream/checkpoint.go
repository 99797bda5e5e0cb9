package stream

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// table is the Tollgate table as the reader keeps its own items in it: a
// checkpoint per stream shard here, shard leases and workers
// (shardlease.go), all in the registry partition.
type table struct {
	db   *ddb.Client
	name string
}

func tableOf(s *dynamodb.Store) table { return table{db: s.Client(), name: s.Table()} }

// seqWidth is the width Seq strings are padded to: stream sequence numbers
// are decimal strings of up to 40 digits, compared as numbers.
const seqWidth = 48

// minSeqWidth is the shortest sequence number the Streams API accepts;
// DynamoDB Local's are zero-padded to it.
const minSeqWidth = 21

// unpadSeq undoes padSeq for the Streams API: without the padding, but no
// shorter than minSeqWidth (a sequence number of DynamoDB Local keeps its
// own leading zeros; AWS's have none and are longer).
func unpadSeq(seq string) string {
	seq = strings.TrimLeft(seq, "0")
	if len(seq) < minSeqWidth {
		seq = strings.Repeat("0", minSeqWidth-len(seq)) + seq
	}
	return seq
}

func padSeq(seq string) string {
	if len(seq) >= seqWidth {
		return seq
	}
	return strings.Repeat("0", seqWidth-len(seq)) + seq
}

// streamCheckpoint is how far one stream shard has been read.
type streamCheckpoint struct {
	seq  string // last sequence number handled (padded); "" for none
	done bool   // the shard is closed and read to its end
}

func checkpointKey(shard string) schema.Item {
	return schema.Item{schema.AttrPK: schema.Str(schema.RegistryPK()), schema.AttrSK: schema.Str(skCheckpoint + shard)}
}

func (t table) checkpoint(ctx context.Context, shard string) (streamCheckpoint, error) {
	out, err := t.db.GetItem(ctx, &ddb.GetItemInput{TableName: &t.name, Key: checkpointKey(shard), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return streamCheckpoint{}, fmt.Errorf("dynamodb: read stream checkpoint: %w", err)
	}
	return streamCheckpoint{seq: schema.GetS(out.Item, "seq"), done: schema.GetBool(out.Item, "done")}, nil
}

// saveCheckpoint records progress in a shard; it never moves a checkpoint
// back (two readers of one shard only repeat work).
func (t table) saveCheckpoint(ctx context.Context, shard, seq string, done bool) error {
	in := &ddb.UpdateItemInput{
		TableName: &t.name, Key: checkpointKey(shard),
		ExpressionAttributeNames: map[string]string{"#ttl": schema.AttrTTL},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":ttl": schema.Num(time.Now().Add(48 * time.Hour).Unix()),
		},
	}
	if done {
		in.UpdateExpression = aws.String("SET #done = :done, #ttl = :ttl")
		in.ExpressionAttributeNames["#done"] = "done"
		in.ExpressionAttributeValues[":done"] = schema.Bool(true)
	} else {
		in.UpdateExpression = aws.String("SET #seq = :seq, #ttl = :ttl")
		in.ConditionExpression = aws.String("(attribute_not_exists(#seq) OR #seq < :seq)")
		in.ExpressionAttributeNames["#seq"] = "seq"
		in.ExpressionAttributeValues[":seq"] = schema.Str(seq)
	}
	if _, err := t.db.UpdateItem(ctx, in); err != nil && !isConditionFailed(err) {
		return fmt.Errorf("dynamodb: save stream checkpoint: %w", err)
	}
	return nil
}
