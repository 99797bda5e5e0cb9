package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// GETs of an entity and of stored limits answer the version in the body
// and as the ETag; a change with If-Match of a stale version answers 412
// precondition_failed and changes nothing; If-Match: * and no If-Match
// change whatever the version; a malformed If-Match is a 400 naming it.
func TestVersionsOverHTTP(t *testing.T) {
	e := newEnv(t)
	var ent api.Entity
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1", Name: "one"}, &ent)
	if ent.Version != 1 {
		t.Fatalf("created entity at version %d, want 1", ent.Version)
	}
	h := e.want(http.StatusOK, "GET", "/v1/entities/org-1", nil, &ent)
	if got := h.Get("ETag"); got != `"1"` || ent.Version != 1 {
		t.Fatalf("GET entity: ETag %q, version %d; want \"1\", 1", got, ent.Version)
	}
	e.hdr.Set("If-Match", `"1"`)
	h = e.want(http.StatusOK, "PATCH", "/v1/entities/org-1", map[string]any{"name": "two"}, &ent)
	if got := h.Get("ETag"); got != `"2"` || ent.Version != 2 || ent.Name != "two" {
		t.Fatalf("PATCH on version 1: ETag %q, %+v; want version 2 named two", got, ent)
	}
	var apiErr api.Error
	e.want(http.StatusPreconditionFailed, "PATCH", "/v1/entities/org-1", map[string]any{"name": "stale"}, &apiErr)
	if apiErr.Code != "precondition_failed" || !strings.Contains(apiErr.Message, "version 1") {
		t.Errorf("stale PATCH: %+v, want precondition_failed naming version 1", apiErr)
	}
	e.want(http.StatusPreconditionFailed, "DELETE", "/v1/entities/org-1", nil, nil)
	e.hdr.Del("If-Match")
	e.want(http.StatusOK, "GET", "/v1/entities/org-1", nil, &ent)
	if ent.Name != "two" || ent.Version != 2 {
		t.Errorf("after refused changes: %+v, want name two at version 2", ent)
	}

	// Limits: PUT answers the version it stored; GET its ETag.
	var lim api.Limits
	h = e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10"}}, &lim)
	if h.Get("ETag") != `"1"` || lim.Version != 1 {
		t.Fatalf("first PUT: ETag %q, version %d; want 1", h.Get("ETag"), lim.Version)
	}
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:20"}}, &lim)
	h = e.want(http.StatusOK, "GET", "/v1/limits/resources/api", nil, &lim)
	if h.Get("ETag") != `"2"` || lim.Version != 2 {
		t.Fatalf("GET after two PUTs: ETag %q, version %d; want 2", h.Get("ETag"), lim.Version)
	}
	for _, c := range []struct {
		header, value string
		method        string
		status        int
	}{
		{"If-Match", `"1"`, "PUT", http.StatusPreconditionFailed},
		{"If-Match", `"1"`, "DELETE", http.StatusPreconditionFailed},
		{"If-None-Match", "*", "PUT", http.StatusPreconditionFailed},
		{"If-Match", `"2"`, "PUT", http.StatusOK}, // now at 3
		{"If-Match", "*", "PUT", http.StatusOK},   // now at 4
		{"If-Match", `"4"`, "DELETE", http.StatusNoContent},
		{"If-None-Match", "*", "PUT", http.StatusOK}, // stored again, at 1
		{"If-Match", `W/"1"`, "PUT", http.StatusBadRequest},
		{"If-Match", `"1", "2"`, "PUT", http.StatusBadRequest},
		{"If-Match", `1`, "DELETE", http.StatusBadRequest},
		{"If-None-Match", `"1"`, "PUT", http.StatusBadRequest},
	} {
		e.hdr = http.Header{}
		e.hdr.Set(c.header, c.value)
		var body any
		if c.method == "PUT" {
			body = api.Limits{Limits: []string{"rpm:30"}}
		}
		var raw json.RawMessage
		got, _ := e.do(c.method, "/v1/limits/resources/api", body, &raw)
		var ans api.Error
		if got >= 400 {
			_ = json.Unmarshal(raw, &ans)
		}
		switch {
		case got != c.status:
			t.Errorf("%s with %s: %s: %d %s, want %d", c.method, c.header, c.value, got, raw, c.status)
		case got == http.StatusBadRequest && ans.Field != c.header:
			t.Errorf("%s with %s: %s: field %q, want %s", c.method, c.header, c.value, ans.Field, c.header)
		case got == http.StatusPreconditionFailed && ans.Code != "precondition_failed":
			t.Errorf("%s with %s: %s: code %q, want precondition_failed", c.method, c.header, c.value, ans.Code)
		}
	}
	e.hdr = http.Header{}
	h = e.want(http.StatusOK, "GET", "/v1/limits/resources/api", nil, &lim)
	if h.Get("ETag") != `"1"` {
		t.Errorf("stored again: ETag %q, want \"1\"", h.Get("ETag"))
	}
	var list api.LimitsListResponse
	e.want(http.StatusOK, "GET", "/v1/limits", nil, &list)
	if len(list.Configs) != 1 || list.Configs[0].Version != 1 {
		t.Errorf("listing: %+v, want one config at version 1", list.Configs)
	}
}

// gatedReads holds the answers of a store's entity reads, once armed,
// until n reads have been made: concurrent read-then-write changes then
// all read the same version before any writes.
type gatedReads struct {
	store.Store
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func (g *gatedReads) arm(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n, g.release = n, make(chan struct{})
}

func (g *gatedReads) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	e, err := g.Store.GetEntity(ctx, ns, id) // read first: the gate holds the answer
	g.mu.Lock()
	release := g.release
	if g.n > 0 {
		if g.n--; g.n == 0 {
			close(release)
			g.release = nil
		}
	}
	g.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return model.Entity{}, ctx.Err()
		}
	}
	return e, err
}

// Concurrent PATCHes without If-Match each apply to the entity as stored
// (read, then written on the version read): two that change different
// fields at once both keep theirs, where a patch of a stale read would
// put the other's field back.
func TestConcurrentPatchesKeepEachField(t *testing.T) {
	gs := &gatedReads{Store: memory.New()}
	e := newEnvOver(t, gs)
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1"}, nil)
	const rounds = 5
	for r := range rounds {
		gs.arm(2) // both patches read the entity before either writes
		round := strconv.Itoa(r)
		patches := []map[string]any{{"name": "round-" + round}, {"metadata": map[string]string{"round": round}}}
		var wg sync.WaitGroup
		for _, p := range patches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, _ := e.do("PATCH", "/v1/entities/org-1", p, nil); got != http.StatusOK {
					t.Errorf("PATCH %v: %d", p, got)
				}
			}()
		}
		wg.Wait()
		var ent api.Entity
		e.want(http.StatusOK, "GET", "/v1/entities/org-1", nil, &ent)
		if ent.Name != "round-"+round || ent.Metadata["round"] != round {
			t.Fatalf("round %d: %+v, want both patches' fields", r, ent)
		}
		if want := int64(1 + 2*(r+1)); ent.Version != want {
			t.Fatalf("round %d: version %d, want %d", r, ent.Version, want)
		}
	}
}
