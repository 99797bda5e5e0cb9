package cli

import (
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// With -o json an error is one JSON object on standard output, shaped like
// the HTTP API's error bodies, with the usual exit code; the message on
// standard error says the retry time once.
func TestJSONErrors(t *testing.T) {
	c := newCLI(t)
	spend := []string{"acquire", "-e", "k", "-r", "api", "-c", "rpm=1", "-l", "rpm:1/hour"}
	c.want(ExitOK, spend...)

	code, out, errOut := run(t, "", append(spend, "--store", c.store, "-o", "json")...)
	var er api.Error
	decode(t, out, &er)
	if code != ExitRateLimited || er.Code != api.CodeRateLimited || er.RetryAfterMS <= 0 || er.RetryAfterMS > 3_600_000 ||
		len(er.Limits) != 1 || !er.Limits[0].Exceeded || !strings.Contains(er.Message, "retry after") {
		t.Errorf("429 -o json: exit %d, %+v", code, er)
	}
	if n := strings.Count(errOut, "retry after"); n != 1 {
		t.Errorf("stderr says the retry time %d times: %q", n, errOut)
	}
	code, out, errOut = run(t, "", append(spend, "--store", c.store)...)
	if code != ExitRateLimited || !strings.Contains(out, "EXCEEDED") || strings.Count(errOut, "retry after") != 1 {
		t.Errorf("429 as a table: exit %d\n%s%s", code, out, errOut)
	}

	for _, tt := range []struct {
		args              []string
		exit              int
		code, field, kind string
	}{
		{[]string{"acquire", "-e", "k", "-r", "api", "-c", "rpm=5", "-l", "rpm:1/hour"}, ExitFailure, api.CodeInvalidArgument, "consume.rpm", ""},
		{[]string{"entity", "show", "ghost"}, ExitFailure, api.CodeNotFound, "", "entity_not_found"},
		{[]string{"limits", "set", "--resource", "api", "--on-unavailable", "allow", "rpm:5"}, ExitUsage, api.CodeInvalidArgument, "", "usage"},
		{[]string{"limits", "set", "--system", "rpm:lots"}, ExitUsage, api.CodeInvalidArgument, "limit", ""},
	} {
		code, out, _ := run(t, "", append(tt.args, "--store", c.store, "-o", "json")...)
		var er api.Error
		decode(t, out, &er)
		if code != tt.exit || er.Code != tt.code || er.Field != tt.field || (tt.kind != "" && er.Reason != tt.kind) || er.Message == "" {
			t.Errorf("%v -o json: exit %d, %+v; want exit %d, %s, field %q, reason %q", tt.args, code, er, tt.exit, tt.code, tt.field, tt.kind)
		}
	}
	// Drift is reported by diff's own JSON, not by an error object after it.
	code, out, _ = run(t, "system:\n  limits: [\"rpm:5/min\"]\n", "limits", "diff", "-f", "-", "--store", c.store, "-o", "json")
	var changes []change
	decode(t, out, &changes)
	if code != ExitFailure || len(changes) != 1 {
		t.Errorf("diff -o json: exit %d, %s", code, out)
	}
}
