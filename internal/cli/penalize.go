package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// penaltyFlags are the flags of tollgate penalize.
type penaltyFlags struct {
	entity, resource string
	forDur           time.Duration
	until            string
	limits           []string
	reason           string
}

func newPenalizeCmd(g *globals) *cobra.Command {
	var f penaltyFlags
	cmd := &cobra.Command{
		Use:   "penalize",
		Short: "Empty rate limits of an entity and resource until a time (a vendor's 429)",
		Long: `Empty the named rate limits of an entity and resource until a time, for
every process sharing the store: what to do when a vendor answers 429 with
its own retry-after. Acquires before then are denied with a retry-after of
at least that long; from then the limits refill from zero. Give the end as
a duration from now (--for) or a time (--until, RFC 3339), at most 24h
ahead. The audit log records who penalized, and the reason.`,
		Example: `  tollgate penalize -e team-a -r openai/gpt-4o --for 30s --limits rpm,tpm --reason "vendor 429"
  tollgate penalize -e team-a -r openai/gpt-4o --until 2026-01-01T12:00:00Z --limits tpm --server http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			until, err := f.end(time.Now())
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.lim.Penalize(ctx, f.entity, f.resource, until, f.reason, f.limits, pl.who...); err != nil {
					return err
				}
				return g.printPenalty(f, until)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.entity, "entity", "e", "", "entity id (required)")
	fl.StringVarP(&f.resource, "resource", "r", "", "resource (required)")
	fl.DurationVar(&f.forDur, "for", 0, "how long from now, e.g. 30s (this or --until)")
	fl.StringVar(&f.until, "until", "", "until when, RFC 3339 (this or --for)")
	fl.StringSliceVar(&f.limits, "limits", nil, "the rate limits to empty, comma-separated (required)")
	fl.StringVar(&f.reason, "reason", "", "why, for the audit log")
	for _, name := range []string{"entity", "resource", "limits"} {
		_ = cmd.MarkFlagRequired(name)
	}
	cmd.MarkFlagsMutuallyExclusive("for", "until")
	cmd.MarkFlagsOneRequired("for", "until")
	return cmd
}

// end returns when the penalty ends, from --for (after now) or --until.
func (f *penaltyFlags) end(now time.Time) (time.Time, error) {
	if f.until == "" {
		if f.forDur <= 0 {
			return time.Time{}, usageError{fmt.Errorf("--for %v: must be positive", f.forDur)}
		}
		return now.Add(f.forDur), nil
	}
	t, err := time.Parse(time.RFC3339Nano, f.until)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--until %q: want an RFC 3339 time such as 2026-01-01T12:00:00Z", f.until)}
	}
	return t, nil
}

func (g *globals) printPenalty(f penaltyFlags, until time.Time) error {
	out := map[string]any{"entity": f.entity, "resource": f.resource, "until": until.UTC().Format(time.RFC3339Nano), "limits": f.limits}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "ENTITY", "RESOURCE", "LIMITS", "UNTIL")
		row(w, f.entity, f.resource, strings.Join(f.limits, ","), stamp(until))
	})
}

func newResetCmd(g *globals) *cobra.Command {
	var entity, resource, reason string
	var limits []string
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Refill rate limits of an entity and resource, lifting a penalty",
		Long: `Refill the rate limits of an entity's bucket for a resource (those named
with --limits, or every rate limit the bucket holds) to capacity, for every
process sharing the store: it lifts a penalty, and forgives debt and
consumption. Concurrency and reserved limits are refused: their tokens come
back when the leases holding them end. The audit log records who reset,
and the reason. Through a server (--server) it needs an admin key.`,
		Example: `  tollgate reset -e team-a -r openai/gpt-4o --reason "vendor back"
  tollgate reset -e team-a -r openai/gpt-4o --limits rpm --server http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.adm.Reset(ctx, entity, resource, reason, limits, pl.who...); err != nil {
					return err
				}
				sts, err := pl.lim.Available(ctx, entity, resource)
				if err != nil { // no stored limits: the reset stands, there is nothing to show
					fmt.Fprintf(g.stderr, "reset %s/%s\n", entity, resource)
					return nil
				}
				return g.printStatuses(sts)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&entity, "entity", "e", "", "entity id (required)")
	fl.StringVarP(&resource, "resource", "r", "", "resource (required)")
	fl.StringSliceVar(&limits, "limits", nil, "the rate limits to refill, comma-separated (default: all of the bucket's)")
	fl.StringVar(&reason, "reason", "", "why, for the audit log")
	for _, name := range []string{"entity", "resource"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
