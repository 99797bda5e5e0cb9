package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// usageFlags select usage snapshots.
type usageFlags struct {
	entity, resource, window string
	since                    time.Duration
	plot                     string
}

func (f *usageFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.entity, "entity", "e", "", "the entity (every resource, or -r's)")
	cmd.Flags().StringVarP(&f.resource, "resource", "r", "", "the resource (every entity, without -e)")
	cmd.Flags().StringVar(&f.window, "window", "hour", "hour or day")
	daysVar(cmd.Flags(), &f.since, "since", 24*time.Hour, "how far back, e.g. 6h or 7d")
	cmd.Flags().StringVar(&f.plot, "plot", "", "also draw this limit's consumption per window as an ASCII bar chart")
	cmd.MarkFlagsOneRequired("entity", "resource")
}

func (f *usageFlags) query() (tollgate.UsageQuery, error) {
	w := tollgate.Window(f.window)
	if !w.Valid() {
		return tollgate.UsageQuery{}, usagef("--window %q: want hour or day", f.window)
	}
	if f.since <= 0 {
		return tollgate.UsageQuery{}, usagef("--since %v: want a positive duration", f.since)
	}
	to := time.Now()
	return tollgate.UsageQuery{Entity: f.entity, Resource: f.resource, Window: w, From: to.Add(-f.since), To: to}, nil
}

func newUsageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what entities consumed, per hour or day",
		Long: `Usage snapshots count, per entity, resource and hour or day, the net
tokens consumed of each limit and the acquires made. On the embedded and
memory stores the server records them (it flushes every second); on
DynamoDB an aggregator writes them from the table's stream (tollgate
aggregator, or the Lambda function, docs/aggregator.md). They are kept 90
days unless the server or aggregator was given another --retention.

On a DynamoDB table where no aggregator has ever run (each marks the table
when it starts), a query that finds nothing prints its empty answer, says
so on standard error, and exits 1: the table has no usage because nothing
writes any, not because nothing was consumed.`,
		Example: `  tollgate usage list -e key-1 --since 6h
  tollgate usage summary -r openai/gpt-4o --window day --since 720h --plot tpm`,
	}
	cmd.AddCommand(newUsageListCmd(g), newUsageSummaryCmd(g))
	return cmd
}

func newUsageListCmd(g *globals) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List usage snapshots (with --plot, chart one limit over time instead)",
		Example: `  tollgate usage list -e key-1 --since 6h
  tollgate usage list -r openai/gpt-4o --window day --since 720h -o json
  tollgate usage list -e org-acme --plot tpm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				us, err := allUsage(ctx, pl, q)
				if err != nil {
					return err
				}
				var none error
				if len(us) == 0 {
					none = g.noUsage(ctx, pl)
				}
				if f.plot != "" && g.output == "table" {
					plot(g.stdout, us, f.plot, q.Window)
				} else if err := g.printUsage(us); err != nil {
					return err
				}
				return none
			})
		},
	}
	f.add(cmd)
	return cmd
}

// allUsage reads every page of q.
func allUsage(ctx context.Context, pl *planes, q tollgate.UsageQuery) ([]tollgate.Usage, error) {
	var all []tollgate.Usage
	for {
		page, next, err := pl.adm.Usage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		q.After = next
	}
}

// errNoAggregator is why a DynamoDB table has no usage to show: nothing
// writes any.
var errNoAggregator = errors.New("no aggregator has written usage snapshots to this table: run tollgate aggregator or deploy the Lambda (docs/aggregator.md)")

// noUsage is called when a query found no usage. On DynamoDB only an
// aggregator writes usage snapshots (tollgate aggregator, or the Lambda
// function, from the table's stream), and each marks the table when it
// starts: on a table without the mark the empty answer says nothing about
// what was consumed, and noUsage returns errNoAggregator, so that the
// command fails (exit 1) after its empty output rather than pass for "no
// usage". It costs one small read, only when nothing was found. Other
// stores record usage in the processes that write them, and a server
// does not say: for them it returns nil.
func (g *globals) noUsage(ctx context.Context, pl *planes) error {
	st, ok := pl.store.(*dynamodb.Store)
	if !ok {
		return nil
	}
	_, marked, err := stream.ReadAggregatorMark(ctx, st)
	switch {
	case err != nil:
		fmt.Fprintf(g.stderr, "no usage found, and whether an aggregator writes usage to this table is unknown: %v\n", err)
	case !marked:
		return reportedError{errNoAggregator}
	}
	return nil
}

func (g *globals) printUsage(us []tollgate.Usage) error {
	out := api.UsageResponse{Usage: make([]api.Usage, len(us))}
	for i, u := range us {
		out.Usage[i] = api.Usage{Entity: u.Entity, Resource: u.Resource, Window: string(u.Window), StartMS: u.Start.UnixMilli(), Consumed: u.Consumed, Events: u.Events}
	}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "START", "ENTITY", "RESOURCE", "ACQUIRES", "CONSUMED")
		for _, u := range us {
			row(w, stamp(u.Start), u.Entity, u.Resource, u.Events, consumedText(u.Consumed))
		}
	})
}

func consumedText(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// plot draws limit's consumption per window (summed over the snapshots of
// each window) as horizontal bars, empty windows included.
func plot(w io.Writer, us []tollgate.Usage, limit string, win tollgate.Window) {
	if len(us) == 0 {
		fmt.Fprintln(w, "no usage in this range")
		return
	}
	sums := map[time.Time]int64{}
	var peak int64
	first, last := us[0].Start, us[0].Start
	for _, u := range us {
		sums[u.Start] += u.Consumed[limit]
		peak = max(peak, sums[u.Start])
		first, last = minTime(first, u.Start), maxTime(last, u.Start)
	}
	const width = 50
	layout := "2006-01-02 15:04"
	if win == tollgate.Daily {
		layout = "2006-01-02"
	}
	fmt.Fprintf(w, "%s per %s\n", limit, win)
	for t := first; !t.After(last); t = t.Add(win.Duration()) {
		n := sums[t]
		bar := 0
		if peak > 0 && n > 0 {
			bar = max(1, int(n*width/peak))
		}
		fmt.Fprintf(w, "%s |%-*s %d\n", t.UTC().Format(layout), width, strings.Repeat("#", bar), n)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func newUsageSummaryCmd(g *globals) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Total, average and peak per limit (with --plot, and a chart of one limit)",
		Example: `  tollgate usage summary -r openai/gpt-4o --window day --since 720h
  tollgate usage summary -e org-acme --plot tpm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				sum, err := pl.adm.UsageSummary(ctx, q)
				if err != nil {
					return err
				}
				out := api.UsageSummary{Windows: sum.Windows, Events: sum.Events, Limits: map[string]api.LimitUsage{}}
				for name, l := range sum.Limits {
					out.Limits[name] = api.LimitUsage{Total: l.Total, Average: l.Average, Peak: l.Peak, PeakStartMS: l.PeakStart.UnixMilli()}
				}
				err = g.printOut(out, func(w *tabwriter.Writer) {
					row(w, "LIMIT", "TOTAL", "AVERAGE/"+strings.ToUpper(string(q.Window)), "PEAK", "PEAK AT")
					for _, name := range slices.Sorted(maps.Keys(sum.Limits)) {
						l := sum.Limits[name]
						row(w, name, l.Total, fmt.Sprintf("%.1f", l.Average), l.Peak, stamp(l.PeakStart))
					}
					row(w, "acquires", sum.Events, "", "", "")
				})
				if err == nil && sum.Events == 0 && len(sum.Limits) == 0 {
					err = g.noUsage(ctx, pl)
				}
				if err == nil && q.Entity == "" && g.output == "table" {
					// Summed over a resource's entities: an acquire that
					// cascades is in its key's snapshot and its parent's.
					fmt.Fprintln(g.stderr, "note: these totals sum every entity of the resource; an acquire that cascades to a parent counts once at each level it debited")
				}
				if err != nil || f.plot == "" || g.output != "table" {
					return err
				}
				us, err := allUsage(ctx, pl, q)
				if err != nil {
					return err
				}
				fmt.Fprintln(g.stdout)
				plot(g.stdout, us, f.plot, q.Window)
				return nil
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newCapacityCmd(g *globals) *cobra.Command {
	var resource string
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Sum each limit's capacity and availability over a resource's entities",
		Long: `Read every bucket of a resource (a sharded one once) and sum, per limit,
the capacity and the balance now, over the entities using it. Entities
back at full capacity may be left out (stores forget full buckets): the
sums and the utilisation describe the entities that are drawing on it.`,
		Example: "  tollgate capacity -r openai/gpt-4o",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				rc, err := pl.adm.Capacity(ctx, resource)
				if err != nil {
					return err
				}
				return g.printOut(api.FromCapacity(rc), func(w *tabwriter.Writer) {
					row(w, "LIMIT", "KIND", "CAPACITY", "AVAILABLE", "UTILISATION")
					for _, l := range rc.Limits {
						row(w, l.Limit, l.Kind, l.Capacity, l.Available, fmt.Sprintf("%.1f%%", 100*l.Utilisation))
					}
					row(w, fmt.Sprintf("(%d entities)", rc.Entities), "", "", "", "")
				})
			})
		},
	}
	cmd.Flags().StringVarP(&resource, "resource", "r", "", "the resource (required)")
	_ = cmd.MarkFlagRequired("resource")
	return cmd
}
