package cli

import (
	"context"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

func newEntityCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "entity", Short: "Create, list, show, update and delete entities",
		Example: `  tollgate entity create org-1 --name Acme
  tollgate entity create key-1 --parent org-1 --cascade
  tollgate entity list
  tollgate entity update key-1 --parent org-2
  tollgate entity children org-1`}
	var e tollgate.Entity
	var meta map[string]string
	create := &cobra.Command{
		Use:   "create ID",
		Short: "Create an entity",
		Example: `  tollgate entity create org-1 --name "Acme"
  tollgate entity create key-1 --parent org-1 --cascade --meta owner=alice`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.ID, e.Metadata = args[0], meta
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				created, err := pl.adm.CreateEntity(ctx, e, pl.who...)
				if err != nil {
					return err
				}
				return g.printEntities([]tollgate.Entity{created})
			})
		},
	}
	create.Flags().StringVar(&e.Name, "name", "", "display name")
	create.Flags().StringVar(&e.ParentID, "parent", "", "parent entity id")
	create.Flags().BoolVar(&e.Cascade, "cascade", false, "acquires also debit the parent's buckets")
	create.Flags().StringToStringVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	show := &cobra.Command{
		Use: "show ID", Short: "Show an entity", Args: cobra.ExactArgs(1),
		Example: "  tollgate entity show org-1",
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				e, err := pl.adm.GetEntity(ctx, args[0])
				if err != nil {
					return err
				}
				return g.printEntities([]tollgate.Entity{e})
			})
		},
	}
	del := &cobra.Command{
		Use: "delete ID", Short: "Delete an entity with its limits and buckets", Args: cobra.ExactArgs(1),
		Example: "  tollgate entity delete key-1",
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error { return pl.adm.DeleteEntity(ctx, args[0], pl.who...) })
		},
	}
	children := &cobra.Command{
		Use: "children ID", Short: "List an entity's children", Args: cobra.ExactArgs(1),
		Example: "  tollgate entity children org-1 -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				es, err := pl.adm.Children(ctx, args[0])
				if err != nil {
					return err
				}
				return g.printEntities(es)
			})
		},
	}
	cmd.AddCommand(create, show, newEntityListCmd(g), newEntityUpdateCmd(g), del, children)
	return cmd
}

func newNamespaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "namespace", Aliases: []string{"ns"}, Short: "Manage namespaces (tenants)",
		Example: `  tollgate namespace register tenant-a
  tollgate entity create org-1 -n tenant-a
  tollgate namespace delete tenant-a && tollgate namespace purge tenant-a`}
	simple := func(use, short, example string, f func(ctx context.Context, pl *planes, name string) error) *cobra.Command {
		return &cobra.Command{Use: use + " NAME", Short: short, Example: example, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error { return f(ctx, pl, args[0]) })
			}}
	}
	register := simple("register", "Register a namespace", "  tollgate namespace register tenant-a", func(ctx context.Context, pl *planes, name string) error {
		n, err := pl.adm.RegisterNamespace(ctx, name)
		if err != nil {
			return err
		}
		return g.printNamespaces([]tollgate.Namespace{n})
	})
	show := simple("show", "Show a namespace", "  tollgate namespace show tenant-a", func(ctx context.Context, pl *planes, name string) error {
		n, err := pl.adm.GetNamespace(ctx, name)
		if err != nil {
			return err
		}
		return g.printNamespaces([]tollgate.Namespace{n})
	})
	del := simple("delete", "Soft-delete a namespace (its data stays until purged)", "  tollgate namespace delete tenant-a",
		func(ctx context.Context, pl *planes, name string) error { return pl.adm.DeleteNamespace(ctx, name) })
	recov := simple("recover", "Undo a soft delete", "  tollgate namespace recover tenant-a",
		func(ctx context.Context, pl *planes, name string) error { return pl.adm.RecoverNamespace(ctx, name) })
	purge := simple("purge", "Delete every item of a soft-deleted namespace, then the namespace",
		"  tollgate namespace purge tenant-a\n  tollgate namespace purge tenant-a --server http://127.0.0.1:8080 --timeout 30m",
		func(ctx context.Context, pl *planes, name string) error {
			p := newProgress(g.stderr, "purging "+name, -1)
			err := pl.adm.PurgeNamespace(ctx, name, p.set)
			p.done()
			return err
		})
	purge.Annotations = map[string]string{annotationLong: "true"}
	retention := &cobra.Command{Use: "set-retention NAME DURATION",
		Short: "Set how long a namespace keeps its audit events (0: forever)",
		Long: `Set how long the namespace keeps its audit events: 0 keeps them forever (the
default), else 1h to 100 years (7d, 90d, 365d). Older events are hidden
from every audit listing at once and deleted by the reconciler's next sweep
(tollgate serve, reconcile and aggregator run one). Export them first:
tollgate audit export.`,
		Example: "  tollgate namespace set-retention tenant-a 90d\n  tollgate namespace set-retention tenant-a 0",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseDuration(args[1])
			if err != nil {
				return usageError{err}
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				if err := pl.adm.SetAuditRetention(ctx, args[0], d); err != nil {
					return err
				}
				n, err := pl.adm.GetNamespace(ctx, args[0])
				if err != nil {
					return err
				}
				return g.printNamespaces([]tollgate.Namespace{n})
			})
		}}
	list := &cobra.Command{Use: "list", Short: "List namespaces, deleted ones included", Args: cobra.NoArgs,
		Example: "  tollgate namespace list -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				ns, err := pl.adm.ListNamespaces(ctx)
				if err != nil {
					return err
				}
				return g.printNamespaces(ns)
			})
		}}
	cmd.AddCommand(register, list, show, del, recov, purge, retention)
	return cmd
}

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read the audit log",
		Example: "  tollgate audit list -e org-1"}
	var entity, after string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List changes of an entity (or, without -e, of system and resource limits)", Args: cobra.NoArgs,
		Example: "  tollgate audit list -e org-1\n  tollgate audit list --limit 10 -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				evs, err := pl.adm.AuditEvents(ctx, entity, after, limit)
				if err != nil {
					return err
				}
				out := api.AuditResponse{Events: make([]api.AuditEvent, len(evs))}
				for i, e := range evs {
					out.Events[i] = api.FromAuditEvent(e)
				}
				return g.printOut(out, func(w *tabwriter.Writer) {
					row(w, "TIME", "ACTION", "ENTITY", "RESOURCE", "PRINCIPAL", "ID")
					for _, e := range evs {
						row(w, stamp(e.Time), e.Action, dash(e.Entity), dash(e.Resource), dash(e.Principal), e.ID)
					}
				})
			})
		},
	}
	list.Flags().StringVarP(&entity, "entity", "e", "", "entity whose changes to list")
	list.Flags().StringVar(&after, "after", "", "list events after this id (paging)")
	list.Flags().IntVar(&limit, "limit", 100, "most events to list")
	cmd.AddCommand(list, newAuditExportCmd(g))
	return cmd
}

// requestFlags are the flags of acquire and available.
type requestFlags struct {
	entity, resource string
	consume          map[string]int64
	limits           []string
}

func (f *requestFlags) add(cmd *cobra.Command, withConsume bool) {
	cmd.Flags().StringVarP(&f.entity, "entity", "e", "", "entity id (required)")
	cmd.Flags().StringVarP(&f.resource, "resource", "r", "", "resource (required)")
	// A slice: repeated or comma-separated (a limit's text holds no comma).
	cmd.Flags().StringSliceVarP(&f.limits, "limit", "l", nil, "limits to apply instead of the stored ones, e.g. rpm:100/min (repeat, or comma-separate)")
	_ = cmd.MarkFlagRequired("entity")
	_ = cmd.MarkFlagRequired("resource")
	if withConsume {
		cmd.Flags().StringToInt64VarP(&f.consume, "consume", "c", nil, "limit=amount to consume (repeat, or comma-separate: rpm=1,tpm=500; required)")
		_ = cmd.MarkFlagRequired("consume")
	}
}

func (f *requestFlags) parsedLimits() ([]tollgate.Limit, error) {
	if len(f.limits) == 0 {
		return nil, nil
	}
	ls, err := tollgate.ParseLimits(f.limits)
	if err != nil {
		return nil, usageError{err}
	}
	return ls, nil
}

func newAcquireCmd(g *globals) *cobra.Command {
	var f requestFlags
	cmd := &cobra.Command{
		Use:   "acquire",
		Short: "Acquire and commit at once (exit code 3 when rate-limited)",
		Example: `  tollgate acquire -e key-1 -r api -c rpm=1
  tollgate acquire -e key-1 -r openai/gpt-4o -c tpm=1500 -l tpm:100000/min || { [ $? -eq 3 ] && echo "retry later"; }`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limits, err := f.parsedLimits()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				grant, err := pl.lim.AcquireAndCommit(ctx, f.entity, f.resource, f.consume, withLimits(limits)...)
				if rl, ok := asRateLimited(err); ok && g.output != "json" {
					// The table shows which limits denied; -o json prints
					// them in the error object instead.
					if perr := g.printStatuses(rl.Statuses); perr != nil {
						return perr
					}
				}
				if err != nil {
					return err
				}
				return g.printStatuses(grant.Statuses)
			})
		},
	}
	f.add(cmd, true)
	return cmd
}

func newAvailableCmd(g *globals) *cobra.Command {
	var f requestFlags
	cmd := &cobra.Command{
		Use:     "available",
		Short:   "Show what an entity has left of each limit",
		Example: "  tollgate available -e key-1 -r api\n  tollgate available -e key-1 -r api -l rpm:100/min -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limits, err := f.parsedLimits()
			if err != nil {
				return err
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				sts, err := pl.lim.Available(ctx, f.entity, f.resource, withLimits(limits)...)
				if err != nil {
					return err
				}
				return g.printStatuses(sts)
			})
		},
	}
	f.add(cmd, false)
	return cmd
}
