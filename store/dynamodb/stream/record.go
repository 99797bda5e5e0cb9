package stream

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// A stream record of a bucket item, as the process reader (Read) and the
// Lambda handler both see it, becomes a store.Change: what the item's
// acquires consumed, dated when they happened, with a Source that names
// the record the same way for both.

// recordImage is a record of the Streams API as any consumer sees it; ok is
// false for a record without its stream part.
func recordImage(rec types.Record) (Record, bool) {
	sr := rec.Dynamodb
	if sr == nil {
		return Record{}, false
	}
	img := Record{
		Seq: aws.ToString(sr.SequenceNumber), Removed: rec.EventName == types.OperationTypeRemove,
		Old: imageOrNil(sr.OldImage), New: imageOrNil(sr.NewImage),
	}
	if sr.ApproximateCreationDateTime != nil {
		img.Time = *sr.ApproximateCreationDateTime
	}
	return img, true
}

func imageOrNil(m map[string]types.AttributeValue) dynamodb.Image {
	if m == nil {
		return nil
	}
	return streamImage(m)
}

// changeOfImage turns a stream record of a bucket item, seen as img, into
// a change, whose Source is the one the Lambda handler gives the same
// record (Source).
func changeOfImage(shard string, rec types.Record, img Record) (store.Change, bool, error) {
	c, ok := ChangeOf(img)
	if !ok {
		return c, false, nil
	}
	// Only changes need a Source: records of other items (usage snapshots,
	// checkpoints, leases: this reader's own writes among them) are
	// dropped without one.
	src, err := SourceOf(shard, rec.Dynamodb.Keys)
	if err != nil {
		return store.Change{}, false, fmt.Errorf("dynamodb: stream shard %s, record %s: %w", shard, img.Seq, err)
	}
	c.Source = src
	return c, true, nil
}

// KeyAttr is one attribute of a stream record's item key (its Keys), in the
// form every consumer of the stream reads it: Type "S", "N" or "B", and
// Text the string, the number's decimal text as the stream gives it, or the
// binary value in standard base64 (with padding).
type KeyAttr struct {
	Type string
	Text string
}

// Source is the Source of the change a stream record makes: the
// stream shard and the record's item key, as in
//
//	shardId-00000001700000000000-0123abcd/"PK"=S"ns/BUCKET#key#res#0","SK"=S"#STATE"
//
// (the shard, a slash, then each key attribute by name in byte order,
// separated by commas: the quoted name, "=", the type and the quoted text;
// quoted as Go's strconv.Quote does).
//
// Both consumers of the stream use it, the process reader (Read, through
// SourceOf) and the AWS Lambda handler (cmd/tollgate-lambda),
// so that a record counts once, whichever of them applies it and however
// often either hands it again. The record's sequence number is the Seq,
// which must grow within a Source (store.UsageStore skips an increment
// whose Seq is not above the last one of its Source): sequence numbers grow
// within a stream shard, and Lambda, with a ParallelizationFactor above 1,
// keeps the order of each item's records only, while the shards of a split
// bucket are distinct items feeding one snapshot; a Source per stream shard
// and item stays in order under both consumers.
//
// The form must never change: a record handed again after a new version is
// deployed must name the same Source, or it counts twice.
func Source(shard string, keys map[string]KeyAttr) (string, error) {
	if shard == "" {
		return "", errors.New("the record names no stream shard")
	}
	if len(keys) == 0 {
		return "", errors.New("the record has no item key")
	}
	var b strings.Builder
	b.WriteString(shard)
	b.WriteByte('/')
	for i, name := range slices.Sorted(maps.Keys(keys)) {
		k := keys[name]
		switch k.Type {
		case "S", "N", "B":
		default:
			return "", fmt.Errorf("key attribute %s has type %q; keys are S, N or B", name, k.Type)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name))
		b.WriteByte('=')
		b.WriteString(k.Type)
		b.WriteString(strconv.Quote(k.Text))
	}
	return b.String(), nil
}

// SourceOf is Source of the Keys of a record read from the DynamoDB
// Streams API: what Read gives its changes.
func SourceOf(shard string, keys map[string]types.AttributeValue) (string, error) {
	attrs := make(map[string]KeyAttr, len(keys))
	for name, v := range keys {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			attrs[name] = KeyAttr{Type: "S", Text: v.Value}
		case *types.AttributeValueMemberN:
			attrs[name] = KeyAttr{Type: "N", Text: v.Value}
		case *types.AttributeValueMemberB:
			attrs[name] = KeyAttr{Type: "B", Text: base64.StdEncoding.EncodeToString(v.Value)}
		default:
			return "", fmt.Errorf("key attribute %s has a type keys cannot have (%T)", name, v)
		}
	}
	return Source(shard, attrs)
}

// Record is one stream record as any consumer of the stream sees it (this
// package's reader, or an AWS Lambda handler): its images are read through
// dynamodb.Image, which each consumer implements for its own form of them.
type Record struct {
	// Source is the record's stream shard and item key, as Source writes
	// them; the change's Source.
	Source string
	Seq    string // the record's sequence number
	// Time is the record's creation time (ApproximateCreationDateTime;
	// AWS gives it to the second, DynamoDB Local to the minute). The zero
	// time means the record had none (see ChangeOf).
	Time     time.Time
	Removed  bool
	Old, New dynamodb.Image // nil when absent
}

// ChangeOf turns a stream record of a bucket item into a change: the rise
// of each limit's consumed counter and of the acquire counter, dated by the
// record. Other items and deletions are not changes.
//
// A record without a creation time (none was ever seen: the field is
// optional in the API) is dated by its new image's refill time, a time of
// the writers' at or before the write: the same on every replay, so that
// the record counts in the same snapshots whoever applies it and however
// often (exactly once holds per snapshot). Only an image without one either
// is dated by this process's clock.
func ChangeOf(r Record) (store.Change, bool) {
	ns, ok := bucketNS(r)
	if !ok {
		return store.Change{}, false
	}
	c := store.Change{
		NS:       ns,
		Key:      bucketKey(r.New),
		Time:     recordTime(r),
		Consumed: map[string]int64{},
		Events:   imageN(r.New, schema.AttrEvents) - imageN(r.Old, schema.AttrEvents),
		Shard:    int(imageN(r.New, schema.AttrShard)),
		Source:   r.Source,
		Seq:      padSeq(r.Seq),
	}
	for _, name := range r.New.Names() {
		if limit, ok := schema.LimitOfAttr(name, schema.FieldConsumed); ok {
			if d := imageN(r.New, name) - imageN(r.Old, name); d != 0 {
				c.Consumed[limit] = d
			}
		}
	}
	return c, len(c.Consumed) > 0 || c.Events != 0
}

// bucketNS returns the namespace of the bucket item r writes; ok is false
// for records of other items and for deletions.
func bucketNS(r Record) (string, bool) {
	if r.Removed || r.New == nil || r.New.S(schema.AttrSK) != schema.SKState {
		return "", false
	}
	return schema.BucketNS(r.New.S(schema.AttrPK))
}

// bucketKey is the key of the bucket a bucket item's image is of.
func bucketKey(img dynamodb.Image) store.BucketKey {
	return store.BucketKey{Entity: img.S(schema.AttrEntity), Resource: img.S(schema.AttrResource)}
}

// recordTime dates a record of a bucket item, in Unix ms (see ChangeOf).
func recordTime(r Record) int64 {
	if r.Time.Unix() > 0 {
		return r.Time.UnixMilli()
	}
	if rf := imageN(r.New, schema.AttrRefilled); rf > 0 {
		return rf
	}
	return time.Now().UnixMilli()
}

func imageN(img dynamodb.Image, name string) int64 {
	if img == nil {
		return 0
	}
	n, _ := strconv.ParseInt(img.N(name), 10, 64)
	return n
}

// streamImage adapts an image of the DynamoDB Streams API.
type streamImage map[string]types.AttributeValue

func (m streamImage) S(name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (m streamImage) N(name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func (m streamImage) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
