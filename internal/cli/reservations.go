package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/store"
)

func newReservationsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "reservations",
		Aliases: []string{"reservation", "resv"},
		Short:   "List, make and release reservations of resource ids",
		Long: `A reservation holds one token of a reserved limit (NAME:N/reserved) under a
resource id, such as an EMR cluster id, until it is released by that id.
These commands work on a store (--store) or through a server (--server).`,
		Example: `  tollgate limits set --resource emr clusters:3/reserved rpm:100/min
  tollgate reservations reserve j-2AXXXXXXGAPLF -e team-a -r emr -c clusters=1
  tollgate reservations list -e team-a -r emr
  tollgate reservations release j-2AXXXXXXGAPLF`,
	}
	cmd.AddCommand(newReservationsListCmd(g), newReservationsReserveCmd(g), newReservationsReleaseCmd(g))
	return cmd
}

func newReservationsListCmd(g *globals) *cobra.Command {
	var entity, resource string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List an entity's reservations, of every resource or of one",
		Example: "  tollgate reservations list -e team-a\n  tollgate reservations list -e team-a -r emr -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				rs, err := allReservations(ctx, pl, entity, resource)
				if err != nil {
					return err
				}
				return g.printReservations(rs)
			})
		},
	}
	cmd.Flags().StringVarP(&entity, "entity", "e", "", "entity id (required)")
	cmd.Flags().StringVarP(&resource, "resource", "r", "", "only this resource's reservations")
	_ = cmd.MarkFlagRequired("entity")
	return cmd
}

// allReservations reads every page of an entity's reservations.
func allReservations(ctx context.Context, pl *planes, entity, resource string) ([]tollgate.Reservation, error) {
	return allPages(func(after string) ([]tollgate.Reservation, string, error) {
		return pl.adm.Reservations(ctx, entity, resource, after, store.MaxLeasePage)
	})
}

// allPages reads every page of a listing whose pages say the after of the
// next ("" after the last).
func allPages[T any](page func(after string) ([]T, string, error)) ([]T, error) {
	var all []T
	for after := ""; ; {
		got, next, err := page(after)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		if next == "" {
			return all, nil
		}
		after = next
	}
}

func newReservationsReserveCmd(g *globals) *cobra.Command {
	var f requestFlags
	var expiry time.Duration
	cmd := &cobra.Command{
		Use:   "reserve ID",
		Short: "Reserve a resource id by hand (exit code 3 when the reserved limit is full)",
		Long: `Reserve ID for an entity and resource: consume names one token of a
reserved limit (and any other limits to debit with it). Reserving an id
the same entity and resource hold already changes nothing, and says it was
already held (exit code 0); an id another entity or resource holds is a
conflict.`,
		Example: "  tollgate reservations reserve j-2AXXXXXXGAPLF -e team-a -r emr -c clusters=1\n" +
			"  tollgate reservations reserve sbx-42 -e team-a -r sandbox -c sandboxes=1 --ttl 8h",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limits, err := f.parsedLimits()
			if err != nil {
				return err
			}
			if expiry < 0 {
				return usageError{fmt.Errorf("--ttl %v: must not be negative", expiry)}
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				r, err := pl.lim.Reserve(ctx, f.entity, f.resource, args[0], f.consume, reserveOptions(limits, expiry, pl.who)...)
				if rl, ok := asRateLimited(err); ok && g.output != "json" {
					if perr := g.printStatuses(rl.Statuses); perr != nil {
						return perr
					}
				}
				if err != nil {
					return err
				}
				if err := g.printReservations([]tollgate.Reservation{r.Reservation}); err != nil {
					return err
				}
				if !r.New {
					// As HTTP's 200 rather than 201: nothing changed. On
					// stderr beside JSON, which stays the reservation's.
					w := g.stdout
					if g.output == "json" {
						w = g.stderr
					}
					fmt.Fprintf(w, "%s was already held by %s/%s: nothing debited again\n", r.ID, r.Entity, r.Resource)
				}
				return nil
			})
		},
	}
	f.add(cmd, true)
	daysVar(cmd.Flags(), &expiry, "ttl", 0, "release it after this long unless released before (a reconciler does); default never")
	// --expiry is the flag's name of one release ago.
	daysVar(cmd.Flags(), &expiry, "expiry", 0, "")
	_ = cmd.Flags().MarkDeprecated("expiry", "use --ttl")
	return cmd
}

func newReservationsReleaseCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "release ID",
		Short: "Release a reservation by its id: its reserved tokens come back",
		Long: `Release the reservation of ID, whoever holds it. Its reserved tokens come
back; what its acquire consumed of rate limits stays consumed. An id that
holds no reservation is an error (exit code 1).`,
		Example: "  tollgate reservations release j-2AXXXXXXGAPLF",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.lim.Release(ctx, args[0], pl.who...); err != nil {
					return err
				}
				return g.printOut(map[string]string{"released": args[0]}, func(w *tabwriter.Writer) {
					row(w, "released", args[0])
				})
			})
		},
	}
}

// reservationJSON is a reservation as -o json prints it.
type reservationJSON struct {
	ID       string `json:"id"`
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	Holder   string `json:"holder,omitempty"`
	Created  string `json:"created"`
	Expires  string `json:"expires,omitempty"` // absent: never
}

func (g *globals) printReservations(rs []tollgate.Reservation) error {
	out := struct {
		Reservations []reservationJSON `json:"reservations"`
	}{make([]reservationJSON, len(rs))}
	for i, r := range rs {
		out.Reservations[i] = reservationJSON{ID: r.ID, Entity: r.Entity, Resource: r.Resource, Holder: r.Holder, Created: stamp(r.Created)}
		if !r.Expires.IsZero() {
			out.Reservations[i].Expires = stamp(r.Expires)
		}
	}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "ID", "ENTITY", "RESOURCE", "HOLDER", "CREATED", "EXPIRES")
		for _, r := range rs {
			row(w, r.ID, r.Entity, r.Resource, dash(r.Holder), stamp(r.Created), stamp(r.Expires))
		}
	})
}

func newEventsCmd(g *globals) *cobra.Command {
	var rules string
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Release reservations named by EventBridge events read from standard input",
		Long: `Read EventBridge events from standard input until it ends, match each
against the rules of --rules, and release the reservation whose id a
matching rule finds in the event. Then print how many events were released,
not found (the id held no reservation: events repeat), unmatched, malformed
(logged with why) and failed (the store did not answer; logged). Works on a
store (--store) or through a server (--server).

The input is a stream of JSON values: one per line, several on a line, or
pretty-printed over many lines. Each is an event, an array of events, an
SQS message whose body is an event, or a batch of them (Lambda's
{"Records": [...]}, or what aws sqs receive-message prints). A value that
is none of these is malformed; so is text that is not JSON, which is
logged with the byte offset of the error, and reading resumes on the next
line.

The exit code is 0 when every value held events and every release was made
or found nothing to release; 1 when a release failed (hand those events
again), when a value was malformed (the rest was still processed: fix the
input or the rules), or when standard input could not be read.

Rules (YAML):

  rules:
    - name: emr-terminated
      source: aws.emr
      detail_type: EMR Cluster State Change
      id: detail.clusterId
      when:
        detail.state: [TERMINATED, TERMINATED_WITH_ERRORS]`,
		Example: `  tollgate events --rules emr-rules.yaml < events.jsonl
  tollgate events --rules emr-rules.yaml -n tenant-a --store 'dynamodb://tollgate?region=eu-west-1' < events.jsonl -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadRules(rules)
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				p, err := events.NewProcessor(cfg, operatorReleases{pl}, g.log)
				if err != nil {
					return err
				}
				runErr := p.Run(ctx, g.stdin)
				st := p.Stats()
				if err := g.printEventStats(st); err != nil {
					return err
				}
				if runErr != nil {
					return runErr
				}
				return eventsError(st)
			})
		},
	}
	cmd.Flags().StringVar(&rules, "rules", "", "the rules file, YAML (required)")
	_ = cmd.MarkFlagRequired("rules")
	return cmd
}

// eventsError is the failure the counts show, if any. A failed release
// can succeed when its event is handed again; a malformed value cannot,
// but a pipeline that fed one should fail rather than pass for having
// released nothing.
func eventsError(st events.Stats) error {
	var why []string
	if st.Failed > 0 {
		why = append(why, fmt.Sprintf("%d %s failed (logged above): hand those events again", st.Failed, plural(int(min(st.Failed, 2)), "release", "releases")))
	}
	if st.Malformed > 0 {
		why = append(why, fmt.Sprintf("%d %s malformed (logged above) and skipped: check the input and the rules", st.Malformed, plural(int(min(st.Malformed, 2)), "value was", "values were")))
	}
	if len(why) == 0 {
		return nil
	}
	return reportedError{errors.New(strings.Join(why, "; "))}
}

// loadRules reads the events rules file; a bad file is a usage error.
func loadRules(path string) (*events.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--rules: %w", err)}
	}
	defer f.Close()
	cfg, err := events.LoadConfig(f)
	if err != nil {
		return nil, usageError{fmt.Errorf("--rules %s: %w", path, err)}
	}
	return cfg, nil
}

func (g *globals) printEventStats(st events.Stats) error {
	out := map[string]uint64{
		events.Released.String(): st.Released, events.NotFound.String(): st.NotFound, events.Unmatched.String(): st.Unmatched,
		events.Malformed.String(): st.Malformed, events.Failed.String(): st.Failed,
	}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "RELEASED", "NOT FOUND", "UNMATCHED", "MALFORMED", "FAILED")
		row(w, st.Released, st.NotFound, st.Unmatched, st.Malformed, st.Failed)
	})
}

// reserveOptions are the options of a reservation made by hand: the
// command's limits, its expiry unless 0, and the operator as the
// principal of its audit event.
func reserveOptions(limits []tollgate.Limit, expiry time.Duration, who []tollgate.WriteOption) []tollgate.AcquireOption {
	opts := append(withLimits(limits), tollgate.WithAudit(who...))
	if expiry != 0 {
		opts = append(opts, tollgate.WithLeaseTTL(expiry))
	}
	return opts
}

// operatorReleases releases the reservations of events as the operator:
// the events processor names the event, the planes the principal.
type operatorReleases struct{ pl *planes }

func (o operatorReleases) Release(ctx context.Context, id string, opts ...tollgate.WriteOption) error {
	return o.pl.lim.Release(ctx, id, append(o.pl.who[:len(o.pl.who):len(o.pl.who)], opts...)...)
}
