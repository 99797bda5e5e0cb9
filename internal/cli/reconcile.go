package cli

import (
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/reconcile"
)

func newReconcileCmd(g *globals) *cobra.Command {
	var once bool
	var interval time.Duration
	var namespaces []string
	var logLevel, logFormat string
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Give back what expired leases hold",
		Long: `End the durable leases of the store named by --store whose expiry has passed:
each is committed (its rate consumption stays: the call probably ran), its
concurrency tokens and reservations come back, its record is deleted and a
lease.expired audit event is written, in one atomic step of the store that
is conditioned on the record. So a lease is ended once, however many
reconcilers run (tollgate serve runs one, the aggregator another, the Lambda
function a third) and whatever its holder does meanwhile.

Without --once it passes every --interval until interrupted; a lease is
given back within its expiry plus about one interval.

Every live namespace is reconciled, or only those named with --namespaces.`,
		Example: `  tollgate reconcile --store 'dynamodb://tollgate?region=eu-west-1'
  tollgate reconcile --once --store embedded:tollgate.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.server != "" {
				return usagef("reconcile works on a store (--store), not through a server: the server reconciles its own store")
			}
			if interval <= 0 {
				return usagef("--interval %v: want a positive duration", interval)
			}
			log, err := newLogger(g, logLevel, logFormat)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			st, closeStore, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer func() { _ = closeStore() }()
			opts := []reconcile.Option{reconcile.WithInterval(interval), reconcile.WithLogger(log), reconcile.WithPrincipal(principal())}
			if len(namespaces) > 0 {
				opts = append(opts, reconcile.WithNamespaces(namespaces...))
			}
			r, err := reconcile.New(st, opts...)
			if err != nil {
				return err
			}
			if once {
				n, err := r.Once(ctx)
				if perr := g.printReconciled(n, r.Stats()); err == nil {
					err = perr
				}
				return err
			}
			log.Info("reconciling leases", "interval", interval)
			_ = r.Run(ctx) // until interrupted: its error is the interrupt's
			return g.printReconciled(int(r.Stats().Reclaimed), r.Stats())
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "make one pass and exit")
	cmd.Flags().DurationVar(&interval, "interval", reconcile.DefaultInterval, "how long to wait between passes")
	cmd.Flags().StringSliceVar(&namespaces, "namespaces", nil, "reconcile only these namespaces (default: every live one)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

// reconciled is the JSON output of tollgate reconcile.
type reconciled struct {
	Reclaimed int    `json:"reclaimed"`
	Skipped   uint64 `json:"skipped"`
	Failed    uint64 `json:"failed"`
}

func (g *globals) printReconciled(n int, st reconcile.Stats) error {
	out := reconciled{Reclaimed: n, Skipped: st.Skipped, Failed: st.Failed}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "RECLAIMED", "SKIPPED", "FAILED")
		row(w, out.Reclaimed, out.Skipped, out.Failed)
	})
}
