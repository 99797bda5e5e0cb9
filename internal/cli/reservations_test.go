package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reservationsOut decodes `reservations list -o json`.
func reservationsOut(t *testing.T, out string) []string {
	t.Helper()
	var v struct {
		Reservations []reservationJSON `json:"reservations"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	var ids []string
	for _, r := range v.Reservations {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestReservationsCommands(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "emr", "clusters:2/reserved", "rpm:100/min")
	reserve := func(code int, id string, extra ...string) string {
		t.Helper()
		return c.want(code, append([]string{"reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1", "-c", "rpm=1"}, extra...)...)
	}
	steps := []struct {
		name string
		run  func() string
		want []string // team-a's reservations after the step
	}{
		{"reserve j-1", func() string { return reserve(ExitOK, "j-1") }, []string{"j-1"}},
		{"reserve j-2 with an expiry", func() string { return reserve(ExitOK, "j-2", "--expiry", "8h") }, []string{"j-1", "j-2"}},
		{"j-1 again: the same", func() string { return reserve(ExitOK, "j-1") }, []string{"j-1", "j-2"}},
		{"j-3: full", func() string { return reserve(ExitRateLimited, "j-3") }, []string{"j-1", "j-2"}},
		{"j-1 for another entity", func() string {
			return c.want(ExitFailure, "reservations", "reserve", "j-1", "-e", "team-b", "-r", "emr", "-c", "clusters=1")
		}, []string{"j-1", "j-2"}},
		{"release j-1", func() string { return c.want(ExitOK, "reservations", "release", "j-1") }, []string{"j-2"}},
		{"release j-1 again", func() string { return c.want(ExitFailure, "reservations", "release", "j-1") }, []string{"j-2"}},
		{"reserve j-3 now", func() string { return reserve(ExitOK, "j-3") }, []string{"j-2", "j-3"}},
	}
	for _, s := range steps {
		s.run()
		if got := reservationsOut(t, c.want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, s.want) {
			t.Errorf("%s: listed %v, want %v", s.name, got, s.want)
		}
	}
	table := c.want(ExitOK, "reservations", "list", "-e", "team-a", "-r", "emr")
	if !strings.Contains(table, "HOLDER") || !strings.Contains(table, "j-3") || strings.Count(table, "\n") != 3 {
		t.Errorf("table:\n%s", table)
	}
	if got := c.want(ExitOK, "reservations", "list", "-e", "team-a", "-r", "other", "-o", "json"); len(reservationsOut(t, got)) != 0 {
		t.Errorf("another resource lists %s", got)
	}
	// Scripts tell the errors apart by the HTTP API's codes.
	for _, c2 := range []struct {
		args       []string
		code, body string
	}{
		{[]string{"reservations", "release", "j-none"}, `"error": "not_found"`, `"reason": "lease_not_found"`},
		{[]string{"reservations", "reserve", "j-2", "-e", "team-b", "-r", "emr", "-c", "clusters=1"}, `"error": "conflict"`, `"reason": "reservation_conflict"`},
		{[]string{"reservations", "release", "j#1"}, `"error": "invalid_argument"`, `"field": "reservation_id"`},
	} {
		out := c.want(ExitFailure, append(c2.args, "-o", "json")...)
		if !strings.Contains(out, c2.code) || !strings.Contains(out, c2.body) {
			t.Errorf("tollgate %s -o json:\n%s", strings.Join(c2.args, " "), out)
		}
	}
}

// The reservation commands and events refuse --server until the server
// serves reservations, and say so.
func TestReservationsNotServed(t *testing.T) {
	for _, args := range [][]string{
		{"reservations", "list", "-e", "team-a"},
		{"reservations", "release", "j-1"},
		{"reservations", "reserve", "j-1", "-e", "a", "-r", "emr", "-c", "clusters=1"},
		{"events", "--rules", "../../events/testdata/emr-rules.yaml"},
	} {
		code, _, errOut := run(t, "", append(args, "--server", "http://127.0.0.1:1")...)
		if code != ExitUsage || !strings.Contains(errOut, "not yet served over HTTP") {
			t.Errorf("tollgate %s --server: exit %d, %s", strings.Join(args, " "), code, errOut)
		}
	}
}

// The recorded events on standard input release the reservations they name.
func TestEventsCommand(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "emr", "clusters:3/reserved")
	for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-kept"} {
		c.want(ExitOK, "reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1")
	}
	recorded, err := os.ReadFile("../../events/testdata/emr-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rules := "../../events/testdata/emr-rules.yaml"
	code, out, errOut := run(t, string(recorded), "events", "--rules", rules, "--store", c.store, "-o", "json")
	if code != ExitOK {
		t.Fatalf("events: exit %d\n%s\n%s", code, out, errOut)
	}
	var counts map[string]uint64
	if err := json.Unmarshal([]byte(out), &counts); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// The batch job was not reserved here: one more not found than with
	// every reservation held.
	want := map[string]uint64{"released": 2, "not_found": 3, "unmatched": 3, "malformed": 2, "failed": 0}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if !strings.Contains(errOut, "malformed event skipped") {
		t.Errorf("the malformed events are not logged:\n%s", errOut)
	}
	if got := reservationsOut(t, c.want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, []string{"j-kept"}) {
		t.Errorf("left %v, want [j-kept]", got)
	}
	// The table form, and bad rules files.
	if code, out, _ := run(t, "", "events", "--rules", rules, "--store", c.store); code != ExitOK || !strings.Contains(out, "NOT FOUND") {
		t.Errorf("events table: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules: [{source: aws.emr}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.yaml")} {
		if code, _, errOut := run(t, "", "events", "--rules", path, "--store", c.store); code != ExitUsage {
			t.Errorf("events --rules %s: exit %d, want %d\n%s", path, code, ExitUsage, errOut)
		}
	}
}
