package dynamodb

// Retries of the items a batch call leaves unprocessed (DynamoDB does that
// under throttling; DynamoDB Local never does). The fault transport forwards
// only part of a request to DynamoDB Local and answers the rest as
// unprocessed, as DynamoDB would: what was not forwarded was not applied.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// attrJSON is an attribute value as the JSON protocol writes it ({"S": ...}).
type attrJSON = map[string]string

// batchKey renders a key as "PK|SK".
func batchKey(k map[string]attrJSON) string { return k[attrPK]["S"] + "|" + k[attrSK]["S"] }

// batchItems puts n items into tt's table and returns their keys; item i
// holds n = i.
func batchItems(t *testing.T, tt *testTable, prefix string, n int) []item {
	t.Helper()
	keys := make([]item, n)
	for i := range keys {
		keys[i] = item{attrPK: str(fmt.Sprintf("%s/k%02d", prefix, i)), attrSK: str("#X")}
		it := item{attrPK: keys[i][attrPK], attrSK: keys[i][attrSK], "n": num(int64(i))}
		if _, err := tt.admin.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &tt.admin.table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// partialBatch is an exchange edit of BatchGetItem or BatchWriteItem: on the
// calls for which partial returns true, only the first keep requests are
// forwarded, and the others come back as unprocessed. It counts every key
// forwarded.
type partialBatch struct {
	table   string
	keep    int
	partial func(call int) bool

	mu        sync.Mutex
	calls     int
	forwarded map[string]int // key -> times forwarded
}

func (p *partialBatch) count(key string) {
	if p.forwarded == nil {
		p.forwarded = map[string]int{}
	}
	p.forwarded[key]++
}

func (p *partialBatch) get(body []byte) ([]byte, func([]byte) []byte) {
	var in struct {
		RequestItems map[string]struct {
			ConsistentRead bool
			Keys           []map[string]attrJSON
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	req := in.RequestItems[p.table]
	var rest []map[string]attrJSON
	if p.partial(p.calls) && len(req.Keys) > p.keep {
		req.Keys, rest = req.Keys[:p.keep], req.Keys[p.keep:]
		in.RequestItems[p.table] = req
	}
	for _, k := range req.Keys {
		p.count(batchKey(k))
	}
	fwd, _ := json.Marshal(in)
	if rest == nil {
		return fwd, nil
	}
	return fwd, unprocessed("UnprocessedKeys", map[string]any{p.table: map[string]any{"Keys": rest, "ConsistentRead": true}})
}

// unprocessed returns a rewrite of a batch response that names v, under
// field, as left unprocessed.
func unprocessed(field string, v any) func([]byte) []byte {
	return func(resp []byte) []byte {
		var out map[string]json.RawMessage
		if err := json.Unmarshal(resp, &out); err != nil {
			panic(err)
		}
		out[field], _ = json.Marshal(v)
		b, _ := json.Marshal(out)
		return b
	}
}

func (p *partialBatch) write(body []byte) ([]byte, func([]byte) []byte) {
	type deleteRequest struct {
		DeleteRequest struct{ Key map[string]attrJSON }
	}
	var in struct{ RequestItems map[string][]deleteRequest }
	if err := json.Unmarshal(body, &in); err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	reqs := in.RequestItems[p.table]
	var rest []deleteRequest
	if p.partial(p.calls) && len(reqs) > p.keep {
		reqs, rest = reqs[:p.keep], reqs[p.keep:]
		in.RequestItems[p.table] = reqs
	}
	for _, r := range reqs {
		p.count(batchKey(r.DeleteRequest.Key))
	}
	fwd, _ := json.Marshal(in)
	if rest == nil {
		return fwd, nil
	}
	return fwd, unprocessed("UnprocessedItems", map[string]any{p.table: rest})
}

// exactlyOnce fails unless every key was forwarded exactly once.
func (p *partialBatch) exactlyOnce(t *testing.T, keys []item) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.forwarded) != len(keys) {
		t.Errorf("%d distinct keys forwarded, want %d", len(p.forwarded), len(keys))
	}
	for _, k := range keys {
		if n := p.forwarded[getS(k, attrPK)+"|"+getS(k, attrSK)]; n != 1 {
			t.Errorf("key %s forwarded %d times, want exactly once", getS(k, attrPK), n)
		}
	}
}

// batchGet retries the keys a BatchGetItem left unprocessed, with a
// backoff, and returns every item in key order: each key read exactly once.
func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	tt := newTestTable(t)
	rec := &sleepRecorder{}
	c := tt.client(t, 5*time.Second, withSleep(rec.sleep))
	keys := batchItems(t, tt, "get", 30)
	absent := item{attrPK: str("get/absent"), attrSK: str("#X")}
	keys = append(keys[:15], append([]item{absent}, keys[15:]...)...)

	p := &partialBatch{table: tt.admin.table, keep: 10, partial: func(call int) bool { return call == 1 }}
	c.net.editExchange("BatchGetItem", p.get)
	got, err := c.batchGet(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range got {
		if i == 15 {
			if it != nil {
				t.Errorf("absent key read as %v", it)
			}
			continue
		}
		want := int64(i)
		if i > 15 {
			want--
		}
		if n, err := getN(it, "n"); err != nil || n != want || getS(it, attrPK) != getS(keys[i], attrPK) {
			t.Errorf("item %d = %v, want the item of key %s (n %d)", i, it, getS(keys[i], attrPK), want)
		}
	}
	p.exactlyOnce(t, keys)
	if req, _ := c.net.take(); req["BatchGetItem"] != 2 {
		t.Errorf("%d BatchGetItem requests, want 2 (one retry of the unprocessed keys)", req["BatchGetItem"])
	}
	expectBackoffs(t, rec, 1, DefaultMaxAttempts)

	// Keys left unprocessed on every attempt: the budget runs out.
	c = tt.client(t, 5*time.Second, withSleep(rec.sleep), WithMaxAttempts(3))
	p = &partialBatch{table: tt.admin.table, keep: 1, partial: func(int) bool { return true }}
	c.net.editExchange("BatchGetItem", p.get)
	if _, err := c.batchGet(context.Background(), keys[:5]); !errors.Is(err, ErrContention) {
		t.Errorf("batchGet with keys unprocessed every time: %v, want ErrContention", err)
	}
	if req, _ := c.net.take(); req["BatchGetItem"] != 3 {
		t.Errorf("%d BatchGetItem requests, want 3 (WithMaxAttempts)", req["BatchGetItem"])
	}
	expectBackoffs(t, rec, 2, 3)
}

// batchDelete retries the items a BatchWriteItem left unprocessed, with a
// backoff: every item is deleted, each sent exactly once.
func TestBatchDeleteRetriesUnprocessedItems(t *testing.T) {
	tt := newTestTable(t)
	rec := &sleepRecorder{}
	c := tt.client(t, 5*time.Second, withSleep(rec.sleep))
	keys := batchItems(t, tt, "del", 30) // two chunks: 25 and 5

	p := &partialBatch{table: tt.admin.table, keep: 10, partial: func(call int) bool { return call == 1 }}
	c.net.editExchange("BatchWriteItem", p.write)
	if err := c.batchDelete(context.Background(), keys); err != nil {
		t.Fatal(err)
	}
	p.exactlyOnce(t, keys)
	if req, _ := c.net.take(); req["BatchWriteItem"] != 3 {
		t.Errorf("%d BatchWriteItem requests, want 3 (25 of which 15 unprocessed and retried, then 5)", req["BatchWriteItem"])
	}
	expectBackoffs(t, rec, 1, DefaultMaxAttempts)
	left, err := tt.admin.batchGet(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range left {
		if it != nil {
			t.Errorf("item %s survived the delete", strconv.Itoa(i))
		}
	}
}
