package cli

import (
	"context"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
)

func newLeasesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "leases",
		Aliases: []string{"lease"},
		Short:   "List open durable leases",
		Long: `Durable leases are those recorded in the store: every lease that holds a
concurrency slot, every lease a server hands out, and those acquired with
WithDurableLease. A reconciler ends them at their expiry. Reservations are
listed by 'tollgate reservations list'. Works on a store (--store) or
through a server (--server).`,
		Example: "  tollgate leases list\n  tollgate leases list -e key-1 --server http://127.0.0.1:8080",
	}
	cmd.AddCommand(newLeasesListCmd(g))
	return cmd
}

func newLeasesListCmd(g *globals) *cobra.Command {
	var entity, resource string
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the open durable leases, of every entity or of one",
		Example: "  tollgate leases list\n  tollgate leases list -e key-1 -r openai/gpt-4o -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				ls, err := allLeases(ctx, pl, entity, resource)
				if err != nil {
					return err
				}
				return g.printLeases(ls)
			})
		},
	}
	cmd.Flags().StringVarP(&entity, "entity", "e", "", "only this entity's leases")
	cmd.Flags().StringVarP(&resource, "resource", "r", "", "only this resource's leases (with --entity)")
	return cmd
}

// allLeases reads every page of a lease listing.
func allLeases(ctx context.Context, pl *planes, entity, resource string) ([]tollgate.LeaseInfo, error) {
	return allPages(func(after string) ([]tollgate.LeaseInfo, string, error) {
		return pl.adm.Leases(ctx, entity, resource, after, store.MaxLeasePage)
	})
}

// leaseJSON is a lease in `leases list -o json`.
type leaseJSON struct {
	ID       string           `json:"id"`
	Entity   string           `json:"entity"`
	Resource string           `json:"resource"`
	Holder   string           `json:"holder,omitempty"`
	Created  string           `json:"created"`
	Expires  string           `json:"expires,omitempty"`
	Consumed map[string]int64 `json:"consumed"`
}

func (g *globals) printLeases(ls []tollgate.LeaseInfo) error {
	out := struct {
		Leases []leaseJSON `json:"leases"`
	}{make([]leaseJSON, len(ls))}
	for i, l := range ls {
		out.Leases[i] = leaseJSON{ID: l.ID, Entity: l.Entity, Resource: l.Resource, Holder: l.Holder,
			Created: stamp(l.Created), Consumed: l.Consumed}
		if !l.Expires.IsZero() {
			out.Leases[i].Expires = stamp(l.Expires)
		}
	}
	return g.printOut(out, func(w *tabwriter.Writer) {
		row(w, "ID", "ENTITY", "RESOURCE", "HOLDER", "EXPIRES", "CONSUMED")
		for _, l := range ls {
			row(w, l.ID, l.Entity, l.Resource, dash(l.Holder), stamp(l.Expires), dash(consumedText(l.Consumed)))
		}
	})
}
