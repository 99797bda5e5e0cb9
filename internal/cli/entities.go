package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// newEntityListCmd is `tollgate entity list`.
func newEntityListCmd(g *globals) *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{
		Use: "list", Short: "List entities, sorted by id", Args: cobra.NoArgs,
		Example: "  tollgate entity list\n  tollgate entity list --limit 50 --after org-1 -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must be 0 (all) or more")
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				es, next, err := listEntities(ctx, pl, after, limit)
				if err != nil {
					return err
				}
				return g.printEntityPage(es, next)
			})
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "list entities with ids after this one (paging)")
	cmd.Flags().IntVar(&limit, "limit", 0, "most entities to list (0: all)")
	return cmd
}

// listEntities reads up to limit entities (0: all) after after, a page of
// at most tollgate.MaxEntityPage at a time. next is the cursor of what
// remains when the limit cut the listing short.
func listEntities(ctx context.Context, pl *planes, after string, limit int) ([]tollgate.Entity, string, error) {
	var out []tollgate.Entity
	for limit == 0 || len(out) < limit {
		size := tollgate.MaxEntityPage
		if limit > 0 {
			size = min(size, limit-len(out))
		}
		page, err := pl.adm.ListEntities(ctx, after, size)
		if err != nil {
			return nil, "", err
		}
		out = append(out, page...)
		if len(page) < size {
			return out, "", nil
		}
		after = page[len(page)-1].ID
	}
	return out, after, nil
}

func (g *globals) printEntityPage(es []tollgate.Entity, next string) error {
	if next == "" {
		return g.printEntities(es)
	}
	out := api.EntitiesResponse{Entities: make([]api.Entity, len(es)), Next: next}
	for i, e := range es {
		out.Entities[i] = api.FromEntity(e)
	}
	return g.printEntitiesAs(out, es)
}

// entityUpdate holds the flags of `tollgate entity update`.
type entityUpdate struct {
	name, parent       string
	cascade, noCascade bool
	meta               map[string]string
}

// apply changes e as the flags given say (cmd tells which were given).
func (u *entityUpdate) apply(cmd *cobra.Command, e tollgate.Entity) tollgate.Entity {
	set := cmd.Flags().Changed
	if set("name") {
		e.Name = u.name
	}
	if set("parent") {
		e.ParentID = u.parent
		if u.parent == "" {
			e.Cascade = false // no parent, nothing to cascade to
		}
	}
	if set("cascade") {
		e.Cascade = u.cascade
	}
	if set("no-cascade") {
		e.Cascade = !u.noCascade
	}
	if set("meta") {
		e.Metadata = u.meta
	}
	return e
}

var errNothingToUpdate = errors.New("nothing to change: give --name, --parent, --cascade, --no-cascade or --meta")

// newEntityUpdateCmd is `tollgate entity update`.
func newEntityUpdateCmd(g *globals) *cobra.Command {
	var u entityUpdate
	var ifVersion int64
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change an entity's name, parent, cascade or metadata",
		Long: `Change an entity's name, parent, cascade flag or metadata; what no flag
names stays as it is. --parent "" makes the entity a root (and stops its
cascade unless --cascade is given); --meta replaces the metadata whole.
The new parent must exist and must not be the entity or one of its
descendants.

The change is applied to the entity as read and written on its version,
so that a change someone else makes at the same time is reported (exit
1), not overwritten: run the update again. --if-version N also requires
the entity to be at version N (the "version" of entity get -o json).`,
		Example: `  tollgate entity update key-1 --parent org-2 --cascade
  tollgate entity update org-1 --name "Acme Ltd"
  tollgate entity update key-1 --no-cascade --if-version 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !anyChanged(cmd, "name", "parent", "cascade", "no-cascade", "meta") {
				return usageError{errNothingToUpdate}
			}
			if cmd.Flags().Changed("if-version") && ifVersion < 1 {
				return usagef("--if-version %d: a version is 1 or more", ifVersion)
			}
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error {
				cur, err := pl.adm.GetEntity(ctx, args[0])
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("if-version") && cur.Version != ifVersion {
					return fmt.Errorf("entity %s: %w; nothing was written", args[0], model.VersionMismatch(ifVersion, cur.Version))
				}
				opts := append(pl.who[:len(pl.who):len(pl.who)], tollgate.IfVersion(cur.Version))
				updated, err := pl.adm.UpdateEntity(ctx, u.apply(cmd, cur), opts...)
				if errors.Is(err, model.ErrPreconditionFailed) {
					return fmt.Errorf("entity %s was changed by someone else while it was updated, not overwritten (%w); run the update again", args[0], err)
				}
				if err != nil {
					return err
				}
				return g.printEntities([]tollgate.Entity{updated})
			})
		},
	}
	cmd.Flags().StringVar(&u.name, "name", "", "display name (empty removes it)")
	cmd.Flags().StringVar(&u.parent, "parent", "", `new parent entity id ("" makes a root)`)
	cmd.Flags().BoolVar(&u.cascade, "cascade", false, "acquires also debit the parent's buckets")
	cmd.Flags().BoolVar(&u.noCascade, "no-cascade", false, "acquires no longer debit the parent's buckets")
	cmd.Flags().StringToStringVar(&u.meta, "meta", nil, "metadata key=value (repeatable; replaces the metadata)")
	cmd.Flags().Int64Var(&ifVersion, "if-version", 0, "update only if the entity is at this version")
	cmd.MarkFlagsMutuallyExclusive("cascade", "no-cascade")
	return cmd
}

func anyChanged(cmd *cobra.Command, names ...string) bool {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}
