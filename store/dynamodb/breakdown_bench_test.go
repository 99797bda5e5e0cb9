package dynamodb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// BenchmarkWriteBreakdown shows where the speculative write's time goes on
// DynamoDB Local, each case paired with one raw conditional UpdateItem on a
// small item (x-paired; see paired): the same raw write (a control, 1.00),
// raw writes on the bigger bucket item, with ALL_NEW, then the speculative
// write's expression built up part by part, then the write itself
// (speculate) and the whole Store.Consume. Not part of make bench-dynamodb;
// run it with -bench WriteBreakdown.
func BenchmarkWriteBreakdown(b *testing.B) {
	ctx := context.Background()
	s := newTable(b)
	p := bucket.Params{Capacity: bucket.MaxTokens / 2, Amount: 1000, Period: 1000}
	br := store.BucketRequest{Key: store.BucketKey{Entity: "k", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}}}
	consume := func() {
		r := &store.ConsumeRequest{Now: time.Now().UnixMilli(), Buckets: []store.BucketRequest{br}}
		if ok, err := s.Consume(ctx, "bench", r); err != nil || !ok {
			b.Fatal(err)
		}
	}
	consume()
	rawKey := item{attrPK: str("raw"), attrSK: str(skState)}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item{attrPK: str("raw"), attrSK: str(skState), "n": num(1 << 60)}}); err != nil {
		b.Fatal(err)
	}
	for range 2000 {
		consume()
	}
	bucketKey := shardKey("bench", br.Key, 0)
	raw := func(key item, rv types.ReturnValue) func() {
		attr := "n"
		if key[attrPK].(*types.AttributeValueMemberS).Value != "raw" {
			attr = "b_rps_tk"
		}
		return func() {
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &s.table, Key: key,
				UpdateExpression:          aws.String("ADD " + attr + " :m"),
				ConditionExpression:       aws.String("attribute_exists(PK) AND " + attr + " >= :one"),
				ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
				ReturnValues:              rv,
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	base := raw(rawKey, "")
	b.Run("control-raw", func(b *testing.B) { paired(b, base, raw(rawKey, "")) })
	b.Run("raw-on-bucket-item", func(b *testing.B) { paired(b, base, raw(bucketKey, "")) })
	b.Run("raw-allnew-bucket-item", func(b *testing.B) { paired(b, base, raw(bucketKey, types.ReturnValueAllNew)) })
	type part struct{ upd, cond string }
	parts := []part{
		{"ADD #tk :m", "attribute_exists(PK) AND #tk >= :one"},
		{"", "#cp = :cp AND #ra = :ra AND #rp = :rp"},
		{"ADD #fa :one", "#fa > :zero"},
		{"ADD #tc :one, #ev :one", ""},
		{"ADD #ttl :one", "#ttl > :zero"},
		{"ADD #wp :m", "#sc = :sc"},
	}
	names := map[string]string{"#tk": "b_rps_tk", "#cp": "b_rps_cp", "#ra": "b_rps_ra", "#rp": "b_rps_rp", "#fa": "b_rps_fa", "#tc": "b_rps_tc", "#ev": "ev", "#ttl": "ttl", "#wp": "b__wp_tk", "#sc": "shard_count"}
	vals := item{":m": num(-1), ":one": num(1), ":zero": num(0), ":cp": num(p.Capacity), ":ra": num(p.Amount), ":rp": num(p.Period), ":sc": num(1)}
	for n := 1; n <= len(parts); n++ {
		var adds, conds []string
		usedN := map[string]string{}
		usedV := item{}
		for _, pt := range parts[:n] {
			for _, x := range []string{pt.upd, pt.cond} {
				for k, v := range names {
					if strings.Contains(x, k) {
						usedN[k] = v
					}
				}
				for k, v := range vals {
					if strings.Contains(x, k) {
						usedV[k] = v
					}
				}
			}
			if pt.upd != "" {
				adds = append(adds, strings.TrimPrefix(pt.upd, "ADD "))
			}
			if pt.cond != "" {
				conds = append(conds, pt.cond)
			}
		}
		upd := "ADD " + strings.Join(adds, ", ")
		for _, rv := range []types.ReturnValue{"", types.ReturnValueAllNew} {
			in := &dynamodb.UpdateItemInput{TableName: &s.table, Key: bucketKey, UpdateExpression: aws.String(upd),
				ConditionExpression: aws.String(strings.Join(conds, " AND ")), ExpressionAttributeNames: usedN, ExpressionAttributeValues: usedV, ReturnValues: rv}
			name := fmt.Sprintf("expression/%d-parts", n)
			if rv != "" {
				name += "-all-new"
			}
			b.Run(name, func(b *testing.B) {
				paired(b, base, func() {
					if _, err := s.db.UpdateItem(ctx, in); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
	tg := s.newTarget(&br, 0, 1)
	b.Run("speculate", func(b *testing.B) {
		paired(b, base, func() {
			if _, err := s.speculate(ctx, "bench", tg, time.Now().UnixMilli()); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("consume", func(b *testing.B) { paired(b, base, consume) })
}
