package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// The same stream records, as the DynamoDB Streams API sends them to
// `tollgate aggregator` and as Lambda hands them to the function (both
// carry the record in one JSON form), get the same Source from the reader's
// conversion (stream.SourceOf, through the AWS SDK's decoding) as
// from the function's (source, through aws-lambda-go's): so the process and
// the function count a record once whichever applies it.
func TestSourceMatchesReader(t *testing.T) {
	const shard = "shardId-00000001767225600000-0123abcd"
	keys := []string{
		`{"PK": {"S": "ns/BUCKET#key#res#0"}, "SK": {"S": "#STATE"}}`,
		`{"PK": {"S": "ns/BUCKET#k\"e\\y/é,=\u0001#gpt-4o#12"}, "SK": {"S": "#STATE"}}`,
		`{"id": {"N": "-1.50E+3"}, "b": {"B": "/w=="}}`,
		`{"é": {"S": "x"}, "Z": {"N": "0"}, "a": {"B": "AAEC"}}`,
	}
	var recs []string
	for i, k := range keys {
		recs = append(recs, `{"eventID": "e`+string(rune('0'+i))+`", "eventName": "MODIFY", "eventVersion": "1.1",
			"eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
			"dynamodb": {"ApproximateCreationDateTime": 1767261600, "Keys": `+k+`,
				"SequenceNumber": "10000000000000000000`+string(rune('0'+i))+`", "SizeBytes": 50,
				"StreamViewType": "NEW_AND_OLD_IMAGES"}}`)
	}
	body := `{"Records": [` + strings.Join(recs, ",") + `]}`

	// The reader's side: GetRecords of the AWS SDK, against a server that
	// answers with body.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if got := r.Header.Get("X-Amz-Target"); got != "DynamoDBStreams_20120810.GetRecords" {
			http.Error(w, "unexpected "+got, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	client := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""), RetryMaxAttempts: 1})
	out, err := client.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it")})
	if err != nil {
		t.Fatal(err)
	}
	// The function's side: the same records decoded as Lambda's runtime
	// decodes its event.
	var ev events.DynamoDBEvent
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != len(keys) || len(ev.Records) != len(keys) {
		t.Fatalf("decoded %d and %d records, want %d", len(out.Records), len(ev.Records), len(keys))
	}
	for i := range keys {
		reader, err := stream.SourceOf(shard, out.Records[i].Dynamodb.Keys)
		if err != nil {
			t.Fatalf("keys %s: reader: %v", keys[i], err)
		}
		function, err := source(shard, ev.Records[i].Change.Keys)
		if err != nil {
			t.Fatalf("keys %s: function: %v", keys[i], err)
		}
		if reader != function {
			t.Errorf("keys %s: reader's Source %q, function's %q", keys[i], reader, function)
		}
	}
	// The first is a bucket item's key, in the form that must never change.
	if got, _ := source(shard, ev.Records[0].Change.Keys); got != shard+`/"PK"=S"ns/BUCKET#key#res#0","SK"=S"#STATE"` {
		t.Errorf("bucket key: Source %q", got)
	}
}
