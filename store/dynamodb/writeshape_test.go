package dynamodb

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkDynamoDBWriteShapes measures what DynamoDB Local and the SDK make
// of the shape of a warm acquire's write alone, without Tollgate: 32
// goroutines each make raw UpdateItems of one shape on an item of their own,
// paired (pairedThroughput, x-paired) with the raw conditional counter write
// that BenchmarkDynamoDB/own compares acquires with. It bounds from above
// what any client code could reach with each shape (issue 26 item 2:
// acquires at 0.9x the raw rate, x-paired at most 1.11):
//
//   - tollgate: the write a warm acquire of one rate limit sends today,
//     verbatim (5 conditions: the 3 parameters, the full tick's bound, the
//     ttl; 3 SETs and 3 ADDs; ALL_OLD) on a bucket item as Tollgate stores
//     it (25 attributes, the index keys among them);
//   - tollgate-updated-old, tollgate-none: the same returning less;
//   - compact-big: the least a write of a token bucket with a consumed
//     counter could be (the parameters packed in one attribute and
//     compared, the full tick's bound; the new full tick, the counter
//     added; UPDATED_NEW) on the same 25-attribute item;
//   - compact-small: the same on an item of 5 attributes (the index keys
//     and the entity's description on another item);
//   - minimal-small: one condition and one SET on the small item, nothing
//     returned: the raw counter write's own shape.
func BenchmarkDynamoDBWriteShapes(b *testing.B) {
	ctx := context.Background()
	tbl := newTable(b)
	const g = 32
	const params = "1000000000/1000000000/1000"
	bucketItem := func(pk string) item {
		return item{attrPK: str(pk), attrSK: str(skState), "shard": num(0), "shard_count": num(1),
			"entity": str("k1"), "resource": str("api"), "cascade": &types.AttributeValueMemberBOOL{},
			"GSI2PK": str("0e8a1e9fe01eccc7/RESOURCE#api"), "GSI2SK": str("BUCKET#k1#0"),
			"GSI3PK": str("0e8a1e9fe01eccc7/ENTITY#k1"), "GSI3SK": str("BUCKET#api#0"),
			"GSI4PK": str("0e8a1e9fe01eccc7#f"), "GSI4SK": str(pk),
			"b_rps_cp": num(1000000000), "b_rps_ra": num(1000000000), "b_rps_rp": num(1000),
			"b_rps_ft": num(1000), "b_rps_tc": num(2000),
			"b__wp_cp": num(1000000), "b__wp_ra": num(1000000), "b__wp_rp": num(1000), "b__wp_ft": num(1000),
			"rf": num(1795923067990), "ev": num(2), "ttl": num(1795926668), "pv": str(params),
		}
	}
	smallItem := func(pk string) item {
		return item{attrPK: str(pk), attrSK: str(skState), "b_rps_ft": num(1000), "b_rps_tc": num(2000), "pv": str(params)}
	}
	tollgate := map[string]string{"#n0": "b_rps_cp", "#n1": "b_rps_ra", "#n2": "b_rps_rp", "#n3": "b_rps_ft",
		"#n4": "b_rps_tc", "#n5": "b__wp_ft", "#n6": "rf", "#n7": "ev", "#n8": "ttl"}
	tollgateValues := func(i int64) item {
		return item{":v0": num(1000000000), ":v1": num(1000000000), ":v2": num(1000), ":v3": num(1 << 62),
			":v4": num(1000 + i), ":v5": num(1000), ":v6": num(1000 + i), ":v7": num(1795923068001 + i),
			":v8": num(1), ":v9": num(1), ":v10": num(1)}
	}
	const (
		tollgateCond   = "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2 AND #n3 <= :v3 AND #n8 >= :v9"
		tollgateUpdate = "SET #n3 = :v4, #n5 = :v6, #n6 = :v7 ADD #n4 :v5, #n7 :v8, #n8 :v10"
		compactCond    = "#p = :p AND #f <= :hi"
		compactUpdate  = "SET #f = :new ADD #t :d"
	)
	compact := map[string]string{"#f": "b_rps_ft", "#t": "b_rps_tc", "#p": "pv"}
	compactValues := func(i int64) item {
		return item{":p": str(params), ":hi": num(1 << 62), ":new": num(1000 + i), ":d": num(1000)}
	}
	for _, sh := range []struct {
		name         string
		small        bool
		cond, update string
		ret          types.ReturnValue
		names        map[string]string
		values       func(i int64) item
	}{
		{"tollgate", false, tollgateCond, tollgateUpdate, types.ReturnValueAllOld, tollgate, tollgateValues},
		{"tollgate-updated-old", false, tollgateCond, tollgateUpdate, types.ReturnValueUpdatedOld, tollgate, tollgateValues},
		{"tollgate-none", false, tollgateCond, tollgateUpdate, types.ReturnValueNone, tollgate, tollgateValues},
		{"compact-big", false, compactCond, compactUpdate, types.ReturnValueUpdatedNew, compact, compactValues},
		{"compact-small", true, compactCond, compactUpdate, types.ReturnValueUpdatedNew, compact, compactValues},
		{"minimal-small", true, "#f <= :hi", "SET #f = :new", types.ReturnValueNone, map[string]string{"#f": "b_rps_ft"},
			func(i int64) item { return item{":hi": num(1 << 62), ":new": num(1000 + i)} }},
	} {
		b.Run(fmt.Sprintf("%s/goroutines-%d", sh.name, g), func(b *testing.B) {
			prefix := uniquePrefix("shape")
			raws, keys := make([]item, g), make([]item, g)
			writes := make([]int64, g)
			for w := range g {
				raws[w] = item{attrPK: str(prefix + "raw" + strconv.Itoa(w)), attrSK: str(skState)}
				pk := prefix + "op" + strconv.Itoa(w)
				keys[w] = item{attrPK: str(pk), attrSK: str(skState)}
				it := bucketItem(pk)
				if sh.small {
					it = smallItem(pk)
				}
				for _, put := range []item{{attrPK: raws[w][attrPK], attrSK: raws[w][attrSK], "n": num(1 << 60)}, it} {
					if _, err := tbl.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tbl.table, Item: put}); err != nil {
						b.Fatal(err)
					}
				}
			}
			pairedThroughput(b, g, func(w int) {
				if _, err := tbl.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: &tbl.table, Key: raws[w],
					UpdateExpression:          aws.String("ADD n :m"),
					ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
					ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
				}); err != nil {
					b.Error(err)
				}
			}, func(w int) {
				writes[w]++
				if _, err := tbl.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: &tbl.table, Key: keys[w],
					UpdateExpression: aws.String(sh.update), ConditionExpression: aws.String(sh.cond),
					ExpressionAttributeNames: sh.names, ExpressionAttributeValues: sh.values(writes[w]),
					ReturnValues: sh.ret, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
				}); err != nil {
					b.Error(err)
				}
			})
		})
	}
}
