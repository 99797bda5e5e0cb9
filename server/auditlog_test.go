package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// GET /v1/audit/log: every entity's events of the namespace in time
// order, paged by the cursor, bounded by since and until; admin keys
// only. PUT /v1/namespaces/{name}/audit-retention hides what is older.
func TestAuditLogRoute(t *testing.T) {
	keys, err := LoadKeys(strings.NewReader(HashKey("admin") + " * admin ops\n" +
		HashKey("reader") + " default read dash\n" +
		HashKey("scoped") + " default read org-1-dash entity=org-1\n" +
		HashKey("acq") + " default acquire svc\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	as := func(key string) { e.hdr.Set("Authorization", "Bearer "+key) }
	var page api.AuditResponse
	get := func(path string) {
		t.Helper()
		page = api.AuditResponse{}
		e.want(http.StatusOK, "GET", path, nil, &page)
	}
	as("admin")
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1"}, nil)
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-2"}, nil)
	e.clk.Advance(time.Second)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}}, nil)

	get("/v1/audit/log")
	var got []string
	for _, ev := range page.Events {
		got = append(got, ev.Action+" "+ev.Entity+ev.Resource)
	}
	if want := []string{"entity.create org-1", "entity.create org-2", "config.set api"}; !slices.Equal(got, want) || page.Next != "" {
		t.Fatalf("audit log = %v (next %q), want %v and no next", got, page.Next, want)
	}
	all := page.Events

	// Paged: a full page names the cursor, the next page resumes after it.
	get("/v1/audit/log?limit=2")
	if len(page.Events) != 2 || page.Next != all[1].ID {
		t.Fatalf("first page = %+v, want 2 events and next %s", page, all[1].ID)
	}
	get("/v1/audit/log?limit=2&after=" + page.Next)
	if len(page.Events) != 1 || page.Events[0].ID != all[2].ID || page.Next != "" {
		t.Errorf("second page = %+v, want %s alone", page, all[2].ID)
	}
	// Bounds: Unix milliseconds or RFC 3339.
	later := strconv.FormatInt(epoch.Add(time.Second).UnixMilli(), 10)
	get("/v1/audit/log?since=" + later)
	if len(page.Events) != 1 || page.Events[0].ID != all[2].ID {
		t.Errorf("since %s = %+v, want the config event", later, page.Events)
	}
	get("/v1/audit/log?until=" + epoch.Add(time.Second).Format(time.RFC3339))
	if len(page.Events) != 2 {
		t.Errorf("until +1s = %+v, want the two creates", page.Events)
	}
	for _, c := range []struct{ query, field string }{
		{"since=yesterday", "since"},
		{"since=" + later + "&until=" + later, "until"},
		{"after=not-an-id", "after"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
	} {
		var er api.Error
		e.want(http.StatusBadRequest, "GET", "/v1/audit/log?"+c.query, nil, &er)
		if er.Field != c.field {
			t.Errorf("%s: error %+v, want field %s", c.query, er, c.field)
		}
	}
	// Admin keys of the namespace only, not a scoped or read key.
	for _, key := range []string{"reader", "scoped", "acq"} {
		as(key)
		e.want(http.StatusForbidden, "GET", "/v1/audit/log", nil, nil)
		e.want(http.StatusForbidden, "PUT", "/v1/namespaces/default/audit-retention", api.AuditRetention{AuditRetentionS: 3600}, nil)
	}
	e.hdr.Del("Authorization")
	e.want(http.StatusUnauthorized, "GET", "/v1/audit/log", nil, nil)

	// A retention of an hour, two hours on: everything is past it.
	as("admin")
	for _, bad := range []int64{-1, 59, 3153600001} {
		var er api.Error
		e.want(http.StatusBadRequest, "PUT", "/v1/namespaces/default/audit-retention", api.AuditRetention{AuditRetentionS: bad}, &er)
		if er.Field != "audit_retention_s" && er.Field != "audit_retention" {
			t.Errorf("retention %d: %+v, want a field error", bad, er)
		}
	}
	e.want(http.StatusNotFound, "PUT", "/v1/namespaces/nope/audit-retention", api.AuditRetention{AuditRetentionS: 3600}, nil)
	e.want(http.StatusNoContent, "PUT", "/v1/namespaces/default/audit-retention", api.AuditRetention{AuditRetentionS: 3600}, nil)
	var ns api.Namespace
	e.want(http.StatusOK, "GET", "/v1/namespaces/default", nil, &ns)
	if ns.AuditRetentionS != 3600 {
		t.Errorf("namespace = %+v, want audit_retention_s 3600", ns)
	}
	get("/v1/audit/log")
	if len(page.Events) != 3 {
		t.Errorf("within the retention: %d events, want 3", len(page.Events))
	}
	e.clk.Advance(2 * time.Hour)
	get("/v1/audit/log")
	if len(page.Events) != 0 {
		t.Errorf("past the retention: %+v, want none", page.Events)
	}
	get("/v1/audit?entity=org-1")
	if len(page.Events) != 0 {
		t.Errorf("GET /v1/audit past the retention: %+v, want none", page.Events)
	}
}
