package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// nextMonth is the start of the month after now's, UTC.
func nextMonth(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// atMonthEnd runs f and returns the next month's start, taken before and
// after f and equal (no month ended meanwhile; f runs again if one did),
// since the CLI decides on the wall clock.
func atMonthEnd(t *testing.T, f func()) time.Time {
	t.Helper()
	for range 2 {
		before := nextMonth(time.Now())
		f()
		if after := nextMonth(time.Now()); after.Equal(before) {
			return before
		}
	}
	t.Fatal("a month ended twice during one command")
	return time.Time{}
}

// Calendar quotas through the CLI: set and read back in their text form,
// the status table's RESETS column gives a quota's window end (and "-" for
// other limits; no column at all when no limit is a quota), -o json its
// resets_at_ms, a refusal waits to the month's end, an unknown zone is a
// usage error naming it.
func TestCalendarQuota(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "llm", "tok:1000/month@UTC", "rpm:100/min")
	if out := c.want(ExitOK, "limits", "get", "--resource", "llm"); !strings.Contains(out, "tok:1000/month@UTC rpm:100/min") {
		t.Errorf("limits get:\n%s", out)
	}

	var out string
	next := atMonthEnd(t, func() { out = c.want(ExitOK, "acquire", "-e", "k", "-r", "llm", "-c", "tok=900", "-c", "rpm=1") })
	for _, want := range []string{
		`(?m)^ENTITY\s.*\sRETRY AFTER\s+RESETS$`,
		`(?m)^k\s+llm\s+tok\s+rate\s+resource\s+100\s+1000\s+900\s+false\s+-\s+` + regexp.QuoteMeta(next.Format(time.RFC3339)) + `$`,
		`(?m)^k\s+llm\s+rpm\s+rate\s+resource\s+99\s+100\s+1\s+false\s+-\s+-$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("acquire's table lacks %s:\n%s", want, out)
		}
	}

	var av api.AvailableResponse
	next = atMonthEnd(t, func() { decode(t, c.want(ExitOK, "available", "-e", "k", "-r", "llm", "-o", "json"), &av) })
	for _, s := range av.Limits {
		if want := map[string]int64{"tok": next.UnixMilli()}[s.Limit]; s.ResetsAtMS != want {
			t.Errorf("available -o json: %s resets_at_ms %d, want %d", s.Limit, s.ResetsAtMS, want)
		}
	}

	// Past the quota: refused until the month ends (on the wall clock, so
	// within a few seconds of it).
	var er api.Error
	var now time.Time
	next = atMonthEnd(t, func() {
		code, out, _ := run(t, "", "acquire", "-e", "k", "-r", "llm", "-c", "tok=200", "--store", c.store, "-o", "json")
		now = time.Now()
		if code != ExitRateLimited {
			t.Fatalf("past the quota: exit %d\n%s", code, out)
		}
		decode(t, out, &er)
	})
	if d := next.Sub(now) - time.Duration(er.RetryAfterMS)*time.Millisecond; er.RetryAfterMS <= 0 || d.Abs() > 5*time.Second {
		t.Errorf("refusal's retry_after_ms %d, want the %v to the month's end", er.RetryAfterMS, next.Sub(now))
	}

	// Without a quota, the table is as it was.
	c.want(ExitOK, "limits", "set", "--resource", "api", "rpm:100/min")
	if out := c.want(ExitOK, "available", "-e", "k", "-r", "api"); strings.Contains(out, "RESETS") {
		t.Errorf("a RESETS column without a quota:\n%s", out)
	}

	code, _, errOut := run(t, "", "limits", "set", "--resource", "llm", "tok:1000/month@Mars/Base", "--store", c.store)
	if code != ExitUsage || !strings.Contains(errOut, `unknown time zone "Mars/Base"`) {
		t.Errorf("unknown zone: exit %d, stderr %q; want a usage error naming it", code, errOut)
	}
}

// A limits file with calendar quotas at two levels: planned, applied, no
// drift after, exported in the same text, and the export plans as no
// change; a quota with an unknown zone is refused before anything is
// written.
func TestLimitsFileCalendarQuota(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	file := writeFile(t, "limits.yaml", `
resources:
  llm:
    limits: ["tok:1000000/month@UTC", "rpm:500/min"]
entities:
  org-1:
    resources:
      llm: ["d:3/day@Europe/Berlin"]
`)
	var changes []change
	decode(t, c.want(ExitOK, "limits", "plan", "-f", file, "-o", "json"), &changes)
	if len(changes) != 2 || changes[0].Action != "create" || changes[1].Action != "create" {
		t.Fatalf("plan %+v", changes)
	}
	c.want(ExitOK, "limits", "apply", "-f", file)
	c.want(ExitOK, "limits", "diff", "-f", file)
	if out := c.want(ExitOK, "limits", "get", "--entity", "org-1", "--for-resource", "llm"); !strings.Contains(out, "d:3/day@Europe/Berlin") {
		t.Errorf("applied entity limits:\n%s", out)
	}
	exported := c.want(ExitOK, "limits", "export")
	for _, want := range []string{`"tok:1000000/month@UTC"`, `"d:3/day@Europe/Berlin"`} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %s:\n%s", want, exported)
		}
	}
	decode(t, c.want(ExitOK, "limits", "plan", "-f", writeFile(t, "exported.yaml", exported), "-o", "json"), &changes)
	if countChanges(changes) != 0 {
		t.Errorf("plan of the export: %+v, want no change", changes)
	}
	bad := writeFile(t, "bad.yaml", "resources:\n  other:\n    limits: [\"tok:5/week@Mars/Base\"]\n")
	if code, _, errOut := run(t, "", "limits", "apply", "-f", bad, "--store", c.store); code != ExitUsage || !strings.Contains(errOut, "Mars/Base") {
		t.Errorf("unknown zone in a file: exit %d, stderr %q", code, errOut)
	}
	c.want(ExitFailure, "limits", "get", "--resource", "other")
}
