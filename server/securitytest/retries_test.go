package securitytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store"
)

// acquireKeyed is POST /v1/acquire on the replica at url with an
// Idempotency-Key; it returns the answer and whether it was marked
// replayed.
func (e *env) acquireKeyed(url, idemKey string, body map[string]any) (answer, bool) {
	e.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest("POST", url+"/v1/acquire", bytes.NewReader(data))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.keys["svc"])
	req.Header.Set(api.IdempotencyKeyHeader, idemKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, out}, resp.Header.Get(api.ReplayedHeader) == "true"
}

// Retries are safe across replicas, on every backend (issue 21 item 2;
// over DynamoDB the replicas are two clients of one table): an acquire
// sent again with its Idempotency-Key to the other replica answers the
// first grant and debits once, with commit:true too, for ten minutes less
// a millisecond; a commit sent again to the other replica answers 200 with
// the first commit's body; a rollback, adjust or extend of the ended lease
// is 409 lease_closed saying how it ended; an id never granted is 404.
func TestProbeRetriesAcrossReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		e.setLimits("/v1/limits/resources/api", "rpd:100/day", "inflight:5/concurrent")
		held := map[string]any{"entity": "k", "resource": "api", "consume": map[string]int64{"rpd": 3, "inflight": 1}}
		first, replayed := e.acquireKeyed(e.a, "order-1", held)
		again, replayedAgain := e.acquireKeyed(e.b, "order-1", held)
		var g1, g2 api.AcquireResponse
		if first.status != http.StatusOK || again.status != http.StatusOK || json.Unmarshal(first.body, &g1) != nil || json.Unmarshal(again.body, &g2) != nil {
			t.Fatalf("acquire: %d %s; again on B: %d %s", first.status, first.body, again.status, again.body)
		}
		if replayed || !replayedAgain || g2.LeaseID != g1.LeaseID || g2.Consumed["rpd"] != 3 || g2.ExpiresMS != g1.ExpiresMS {
			t.Errorf("again on B: %+v (replayed %v), want the first grant %+v replayed", g2, replayedAgain, g1)
		}
		if got := e.available("k", "api", "rpd"); got != 97 {
			t.Errorf("rpd %d, want 97: debited once", got)
		}

		// The commit, its answer lost, sent again to the other replica.
		svc := e.keys["svc"]
		commit := e.call(e.a, svc, "POST", "/v1/leases/"+g1.LeaseID+"/commit", nil)
		commitAgain := e.call(e.b, svc, "POST", "/v1/leases/"+g1.LeaseID+"/commit", nil)
		if commit.status != http.StatusOK || commitAgain.status != http.StatusOK || !bytes.Equal(commit.body, commitAgain.body) {
			t.Errorf("commit: %d %s; again on B: %d %s; want 200 and the same body", commit.status, commit.body, commitAgain.status, commitAgain.body)
		}
		for _, path := range []string{"/rollback", "/adjust", "/extend"} {
			body := any(`{}`)
			if path == "/adjust" {
				body = map[string]any{"consume": map[string]int64{"rpd": 1}}
			}
			a := e.call(e.b, svc, "POST", "/v1/leases/"+g1.LeaseID+path, body)
			if er := a.err(); a.status != http.StatusConflict || er.Reason != "lease_closed" || er.Ended != "committed" {
				t.Errorf("%s of the committed lease on B: %d %s, want 409 lease_closed, ended committed", path, a.status, a.body)
			}
		}
		if a, _ := e.acquireKeyed(e.b, "order-1", held); a.status != http.StatusConflict || a.err().Ended != "committed" {
			t.Errorf("the key of the committed lease on B: %d %s, want 409 lease_closed, ended committed", a.status, a.body)
		}
		unknown := strings.Repeat("0", 32)
		if a := e.call(e.b, svc, "POST", "/v1/leases/"+unknown+"/rollback", `{}`); a.status != http.StatusNotFound || a.err().Reason != "lease_not_found" {
			t.Errorf("rollback of an id never granted: %d %s, want 404 lease_not_found", a.status, a.body)
		}

		// A rollback through A: B says so.
		second, _ := e.acquireKeyed(e.a, "order-2", held)
		var g3 api.AcquireResponse
		if second.status != http.StatusOK || json.Unmarshal(second.body, &g3) != nil {
			t.Fatalf("acquire: %d %s", second.status, second.body)
		}
		if a := e.call(e.a, svc, "POST", "/v1/leases/"+g3.LeaseID+"/rollback", nil); a.status != http.StatusOK {
			t.Fatalf("rollback: %d %s", a.status, a.body)
		}
		if a := e.call(e.b, svc, "POST", "/v1/leases/"+g3.LeaseID+"/extend", `{}`); a.status != http.StatusConflict || a.err().Ended != "rolled_back" {
			t.Errorf("extend of the rolled-back lease on B: %d %s, want 409 lease_closed, ended rolled_back", a.status, a.body)
		}

		// commit:true, remembered for ten minutes on either replica.
		committed := map[string]any{"entity": "j", "resource": "api", "consume": map[string]int64{"rpd": 2}, "commit": true}
		if a, r := e.acquireKeyed(e.a, "order-3", committed); a.status != http.StatusOK || r {
			t.Fatalf("acquire with commit: %d %s (replayed %v)", a.status, a.body, r)
		}
		e.clk.Advance(10*time.Minute - time.Millisecond)
		if a, r := e.acquireKeyed(e.b, "order-3", committed); a.status != http.StatusOK || !r {
			t.Errorf("acquire with commit again on B ten minutes less 1 ms later: %d %s (replayed %v), want the grant replayed", a.status, a.body, r)
		}
		if got := e.available("j", "api", "rpd"); got != 98 {
			t.Errorf("j's rpd %d, want 98: debited once", got)
		}
	})
}
