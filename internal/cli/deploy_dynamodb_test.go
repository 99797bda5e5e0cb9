package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// tollgate deploy on a table that holds an entity an older Tollgate wrote
// (its namespace index entry under the bare namespace id) moves the entry
// to its part and says so; run again, it has nothing to move and says
// nothing of it.
func TestDeployMigratesNamespaceIndex(t *testing.T) {
	url := dynamoStoreURL(t)
	ctx := context.Background()
	spec, err := parseStoreURL(url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openDynamoDB(ctx, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	ns := model.Namespace{Name: "team", ID: "0123456789abcdef", CreatedAt: time.UnixMilli(1_700_000_000_000)}
	if err := st.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ev := model.AuditEvent{ID: ulid.Make().String(), Time: time.Now().UTC().Truncate(time.Millisecond), Action: model.ActionEntityCreate, Entity: "key-1"}
	if err := st.CreateEntity(ctx, ns.ID, model.Entity{ID: "key-1", CreatedAt: ev.Time}, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().UpdateItem(ctx, &awsddb.UpdateItemInput{
		TableName:                 aws.String(st.Table()),
		Key:                       map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: dynamodb.NamespaceKeyPrefix(ns.ID) + "ENTITY#key-1"}, "SK": &types.AttributeValueMemberS{Value: "#META"}},
		UpdateExpression:          aws.String("SET GSI4PK = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: ns.ID}},
	}); err != nil {
		t.Fatal(err)
	}
	const said = "namespace index entries spread over 16 parts: 1\n"
	code, out, errOut := run(t, "", "deploy", "--store", url)
	if code != ExitOK || !strings.Contains(out, said) {
		t.Fatalf("deploy on the older table: exit %d, want %d and %q\nstdout: %s\nstderr: %s", code, ExitOK, said, out, errOut)
	}
	code, out, errOut = run(t, "", "deploy", "--store", url)
	if code != ExitOK || strings.Contains(out, "spread") {
		t.Errorf("deploy again: exit %d, want %d and nothing moved\nstdout: %s\nstderr: %s", code, ExitOK, out, errOut)
	}
	legacy, err := st.Client().Query(ctx, &awsddb.QueryInput{
		TableName:                 aws.String(st.Table()),
		IndexName:                 aws.String("GSI4"),
		KeyConditionExpression:    aws.String("GSI4PK = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: ns.ID}},
	})
	if err != nil || len(legacy.Items) != 0 {
		t.Errorf("entries left under the bare id: %v, %v", legacy, err)
	}
	es, err := st.ListEntities(ctx, ns.ID, "", 10)
	if err != nil || !slices.ContainsFunc(es, func(e model.Entity) bool { return e.ID == "key-1" }) {
		t.Errorf("ListEntities after deploy = %v, %v; want key-1", es, err)
	}
	if keys := dynamodb.NamespaceIndexKeys(ns.ID); len(keys) != dynamodb.NamespaceIndexParts+1 || keys[len(keys)-1] != ns.ID {
		t.Errorf("NamespaceIndexKeys = %v: the parts, then the bare id", keys)
	}
}
