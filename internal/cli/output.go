package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

// printOut writes v as JSON (-o json) or, for tables, calls table with a
// tab-separated writer.
func (g *globals) printOut(v any, table func(w *tabwriter.Writer)) error {
	if g.output == "json" {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

func row(w *tabwriter.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// printStatuses prints statuses as a table (or JSON). The RESETS column,
// the end of a calendar quota's window (RFC 3339, UTC; "-" for other
// limits), is there only when some status is a quota's, so that the usual
// table of rates and slots stays as narrow as it was.
func (g *globals) printStatuses(sts []tollgate.Status) error {
	quotas := slices.ContainsFunc(sts, func(s tollgate.Status) bool { return !s.ResetsAt.IsZero() })
	return g.printOut(api.AvailableResponse{Limits: api.FromStatuses(sts)}, func(w *tabwriter.Writer) {
		head := []any{"ENTITY", "RESOURCE", "LIMIT", "KIND", "SOURCE", "AVAILABLE", "CAPACITY", "REQUESTED", "EXCEEDED", "RETRY AFTER"}
		if quotas {
			head = append(head, "RESETS")
		}
		row(w, head...)
		for _, s := range sts {
			retry := "-"
			if s.Exceeded {
				retry = s.RetryAfter.String()
			}
			exceeded := strconv.FormatBool(s.Exceeded)
			if s.Shadow {
				exceeded += " (shadow)" // would have denied, did not
			}
			cols := []any{s.Entity, s.Resource, s.Limit, s.Kind, dash(s.Source), s.Available, s.Capacity, s.Requested, exceeded, retry}
			if quotas {
				cols = append(cols, stamp(s.ResetsAt))
			}
			row(w, cols...)
		}
	})
}

func (g *globals) printEntities(es []tollgate.Entity) error {
	out := api.EntitiesResponse{Entities: make([]api.Entity, len(es))}
	for i, e := range es {
		out.Entities[i] = api.FromEntity(e)
	}
	return g.printEntitiesAs(out, es)
}

// printEntitiesAs prints es, or out with -o json.
func (g *globals) printEntitiesAs(out api.EntitiesResponse, es []tollgate.Entity) error {
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "ID", "NAME", "PARENT", "CASCADE", "CREATED")
		for _, e := range es {
			row(w, e.ID, dash(e.Name), dash(e.ParentID), e.Cascade, stamp(e.CreatedAt))
		}
	})
}

func (g *globals) printNamespaces(ns []tollgate.Namespace) error {
	out := api.NamespacesResponse{Namespaces: make([]api.Namespace, len(ns))}
	for i, n := range ns {
		out.Namespaces[i] = api.FromNamespace(n)
	}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "NAME", "ID", "CREATED", "DELETED", "AUDIT RETENTION")
		for _, n := range ns {
			keep := "forever"
			if n.AuditRetention > 0 {
				keep = formatDuration(n.AuditRetention)
			}
			row(w, n.Name, n.ID, stamp(n.CreatedAt), stamp(n.DeletedAt), keep)
		}
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// principal names whoever runs this command, for the audit log.
func principal() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}
